/*
 * A controller's listening socket (target.h): made at a path like
 * --socket-path (mode 0600, or 0660 and a group's), replacing a socket a
 * daemon that died left there but never a file in use.  Callable on any
 * thread, since it waits on the file system and the group database: a
 * controller-add runs it as a target job.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib.h>

#include "sandbox.h"
#include "target.h"
#include "vs-error.h"

/*
 * 0 if nothing listens at sa (a socket left by a daemon that died), else
 * -EADDRINUSE (or the -errno that keeps us from telling).  Non-blocking, so
 * a full backlog (ours too) answers EAGAIN rather than holding up the loop.
 */
static int socket_in_use(const struct sockaddr_un *sa)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int ret;

    if (fd < 0) {
        return -errno;
    }
    ret = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ? -EADDRINUSE : -errno;
    close(fd);
    if (ret == -ECONNREFUSED || ret == -ENOENT) {
        return 0;
    }
    return ret == -EAGAIN ? -EADDRINUSE : ret;
}

#ifdef VHOST_SCSI_TEST_HOOKS
/*
 * VHOST_SCSI_TEST_FAULT=listen-hold: the work on a controller's socket
 * path first waits in the open of a FIFO PATH.hold, if there is one, as it
 * would on a socket directory on a stuck mount (which a test cannot make
 * without root).
 */
void target_test_socket_hold(const char *path)
{
    if (!g_strcmp0(g_getenv("VHOST_SCSI_TEST_FAULT"), "listen-hold")) {
        g_autofree char *hold = g_strconcat(path, ".hold", NULL);
        int h = open(hold, O_RDONLY | O_CLOEXEC);

        if (h >= 0) {
            close(h);
        }
    }
}
#endif

/* -errno, with *err saying why the socket at path does not listen. */
static int not_listening(GError **err, int neg_errno, const char *path, const char *why)
{
    return vs_error_set(err, neg_errno, "cannot listen on socket %s: %s", path, why);
}

int target_socket_path_check(const char *kind, const char *path, GError **err)
{
    struct sockaddr_un sa;
    g_autofree char *dir = g_path_get_dirname(path);
    struct stat st;
    int ret = 0;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        ret = -ENAMETOOLONG;
    } else if (stat(dir, &st) < 0) {
        ret = -errno;
    } else if (!S_ISDIR(st.st_mode)) {
        ret = -ENOTDIR;
    }
    if (ret < 0) {
        vs_error_set(err, ret, "cannot listen on %s %s: %s", kind, path,
                     ret == -ENAMETOOLONG ? "the path is too long" : g_strerror(-ret));
    }
    return ret;
}


/*
 * Any thread: everything here waits on the file system at path (a socket
 * directory on NFS, a stuck FUSE mount) or on the group database, so a
 * controller-add runs it as a target job (target-control.c); only the
 * command line's and the --config file's sockets are made on the main
 * thread, at start-up, before anything is served.
 */
int target_listen_on(const char *path, const char *group, struct target_file_id *made,
                     GError **err)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct stat st;
    int fd, ret;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        return not_listening(err, -ENAMETOOLONG, path, "the path is too long");
    }
    strcpy(sa.sun_path, path);
    target_test_socket_hold(path);
    /*
     * Replace a stale socket from a previous run, never any other file, nor
     * a socket something listens on: unlinking that one took its path from
     * it (controller-add at another spelling of a controller's socket, at the
     * control socket, or a second daemon at a first one's), silently.
     */
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            return not_listening(err, -EEXIST, path, "a file that is not a socket is in the way");
        }
        ret = socket_in_use(&sa);
        if (ret < 0) {
            return not_listening(err, ret, path, ret == -EADDRINUSE
                                 ? "something listens there already" : g_strerror(-ret));
        }
        unlink(path);
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return not_listening(err, -errno, path, g_strerror(errno));
    }
    /*
     * Created 0600: only the owner (and --socket-group, below) may attach.
     * The socket's own mode, set before bind, is what bind gives the file
     * (less the umask); the umask itself is the process's, which another
     * job's thread may be setting at the same moment.
     */
    if (fchmod(fd, 0600) < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(fd, 16) < 0) {
        ret = -errno;
        close(fd);
        return not_listening(err, ret, path, g_strerror(-ret));
    }
    if (group) {
        gid_t gid;

        /* Under the filter, from /etc/group only: NSS modules are not allowed. */
        if (sandbox_lookup_group(group, &gid) < 0 || chown(path, (uid_t)-1, gid) < 0 ||
            chmod(path, 0660) < 0) {
            g_autofree char *why = g_strdup_printf("cannot give it to group %s", group);

            close(fd);
            unlink(path);
            return not_listening(err, -EINVAL, path, why);
        }
    }
    if (made) {
        if (lstat(path, &st) < 0) {
            ret = -errno;
            close(fd);
            return not_listening(err, ret, path, g_strerror(-ret));
        }
        *made = (struct target_file_id){ .dev = st.st_dev, .ino = st.st_ino,
                                         .ctime = st.st_ctim };
    }
    return fd;
}

int target_socket_unlink(const char *path, const struct target_file_id *made)
{
    struct stat st;

    if (lstat(path, &st) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    /*
     * Not atomic with the unlink, but a path is taken again only once the
     * removal was answered, and a socket made since has another identity.
     */
    if (st.st_dev != made->dev || st.st_ino != made->ino ||
        st.st_ctim.tv_sec != made->ctime.tv_sec || st.st_ctim.tv_nsec != made->ctime.tv_nsec) {
        return 0;
    }
    return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}
