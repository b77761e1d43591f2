/*
 * Specification of how the daemon accepts front-ends
 * (hw/daemon/target-accept.c), in-process: a peer is known by its
 * credentials (SO_PEERCRED), which connection-list shows; a controller
 * with --allow-uid/--allow-gid lists lets in only peers they name, and
 * closes on any other at once; beyond --max-connections a peer is closed
 * at once too, until a connection has gone.  A peer that was let in is
 * answered (a vhost-user GET_FEATURES); one that was not sees the end of
 * the stream.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib.h>

#include "target-fixture.h"
#include "vhost-user-proto.h"

static int connect_to(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpuint(strlen(path), <, sizeof(sa.sun_path));
    strcpy(sa.sun_path, path);
    g_assert_cmpint(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    return fd;
}

/*
 * Whether the daemon serves fd: GET_FEATURES answered (true), or the
 * stream ended (false).  Blocks until one or the other: accepted or
 * refused, the daemon does one of them at once.
 */
static bool served(int fd)
{
    struct vhost_user_hdr req = { .request = VHOST_USER_GET_FEATURES,
                                  .flags = VHOST_USER_VERSION };
    struct vhost_user_hdr rep;
    uint64_t features;
    ssize_t n;

    /* A closed peer may have reset the stream before the write: that is an end too. */
    if (send(fd, &req, sizeof(req), MSG_NOSIGNAL) != sizeof(req)) {
        return false;
    }
    n = recv(fd, &rep, sizeof(rep), MSG_WAITALL);
    if (n <= 0) {
        return false;
    }
    g_assert_cmpint(n, ==, sizeof(rep));
    g_assert_cmpuint(rep.request, ==, VHOST_USER_GET_FEATURES);
    g_assert_cmpuint(rep.size, ==, sizeof(features));
    g_assert_cmpint(recv(fd, &features, sizeof(features), MSG_WAITALL), ==, sizeof(features));
    return true;
}

static unsigned connection_count(struct target_client *c)
{
    JsonNode *r = call_ok(c, "connection-list", NULL);
    unsigned n = json_array_get_length(json_node_get_array(r));

    json_node_unref(r);
    return n;
}

/* A connection closed by its peer is gone once the daemon has seen the hang-up. */
static void wait_connections(struct target_client *c, unsigned n)
{
    while (connection_count(c) != n) {
        g_thread_yield();
    }
}

static void script_credentials(struct target_client *c)
{
    g_autofree char *sock = target_fixture_path(c->f, "vs.sock");
    int fd = connect_to(sock);
    JsonNode *r;
    JsonObject *o;

    g_assert_true(served(fd));
    r = call_ok(c, "connection-list", NULL);
    g_assert_cmpuint(json_array_get_length(json_node_get_array(r)), ==, 1);
    o = json_array_get_object_element(json_node_get_array(r), 0);
    g_assert_cmpstr(json_object_get_string_member(o, "controller"), ==, "default");
    g_assert_cmpstr(json_object_get_string_member(o, "state"), ==, "connected");
    g_assert_cmpint(json_object_get_int_member(o, "pid"), ==, getpid());
    g_assert_cmpint(json_object_get_int_member(o, "uid"), ==, getuid());
    json_node_unref(r);
    close(fd);
    wait_connections(c, 0);
}

static void script_allowed(struct target_client *c)
{
    g_autofree char *other = target_fixture_path(c->f, "other.sock");
    g_autofree char *mine = target_fixture_path(c->f, "mine.sock");
    g_autofree char *by_uid = g_strdup_printf("{\"name\": \"other\", \"socket\": \"%s\", "
                                              "\"allow_uid\": [%u]}", other, getuid() + 1);
    g_autofree char *by_gid = g_strdup_printf("{\"name\": \"mine\", \"socket\": \"%s\", "
                                              "\"allow_uid\": [%u], \"allow_gid\": [%u]}", mine,
                                              getuid() + 1, getgid());
    int fd;

    json_node_unref(call_ok(c, "controller-add", by_uid));
    json_node_unref(call_ok(c, "controller-add", by_gid));

    /* Not ours: closed at once. */
    fd = connect_to(other);
    g_assert_false(served(fd));
    close(fd);
    g_assert_cmpuint(connection_count(c), ==, 0);

    /* Our group is on its list. */
    fd = connect_to(mine);
    g_assert_true(served(fd));
    g_assert_cmpuint(connection_count(c), ==, 1);
    close(fd);
    wait_connections(c, 0);
}

/* --max-connections 1 */
static void script_limit(struct target_client *c)
{
    g_autofree char *sock = target_fixture_path(c->f, "vs.sock");
    int first = connect_to(sock);
    int second;

    g_assert_true(served(first));
    second = connect_to(sock);
    g_assert_false(served(second));
    close(second);
    g_assert_cmpuint(connection_count(c), ==, 1);

    /* Once the first has gone, there is room again. */
    close(first);
    wait_connections(c, 0);
    second = connect_to(sock);
    g_assert_true(served(second));
    close(second);
    wait_connections(c, 0);
}

static void test_credentials(void)
{
    target_client_run(0, script_credentials);
}

static void test_allowed(void)
{
    target_client_run(0, script_allowed);
}

static void test_limit(void)
{
    target_client_run(1, script_limit);
}

int main(int argc, char **argv)
{
    target_fixture_test_init(&argc, &argv);
    g_test_add_func("/target-accept/peer-credentials", test_credentials);
    g_test_add_func("/target-accept/allowed-peers", test_allowed);
    g_test_add_func("/target-accept/connection-limit", test_limit);
    return g_test_run();
}
