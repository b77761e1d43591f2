/*
 * What both sides of the vhost-user protocol know about each request: its
 * name for log lines, the payload size it must carry and whether it is
 * always answered.  A front-end may send numbers we do not know (newer
 * QEMU), so the lookups never fail: unknown numbers get a generic name,
 * any size and no reply, and the caller logs the number next to the name.
 * Also the one sendmsg with fds attached that every sender uses.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vhost-user-proto.h"

/*
 * One row per request: its name, the payload it must carry, and whether
 * the back-end answers it whatever the flags (the GET_* requests and the
 * few others vhost-user.rst says are always answered); every other
 * request is answered only with NEED_REPLY (REPLY_ACK).  The server
 * validates with it, the front-end and the tests' raw client frame with it.
 */
static const struct vhost_user_request_info requests[VHOST_USER_MAX] = {
    [VHOST_USER_NONE] = { "NONE", VHOST_USER_SIZE_ANY, false },
    [VHOST_USER_GET_FEATURES] = { "GET_FEATURES", 0, true },
    [VHOST_USER_SET_FEATURES] = { "SET_FEATURES", sizeof(uint64_t), false },
    [VHOST_USER_SET_OWNER] = { "SET_OWNER", 0, false },
    [VHOST_USER_RESET_OWNER] = { "RESET_OWNER", 0, false },
    [VHOST_USER_SET_MEM_TABLE] = { "SET_MEM_TABLE", VHOST_USER_SIZE_MEM_TABLE, false },
    [VHOST_USER_SET_LOG_BASE] = { "SET_LOG_BASE", sizeof(struct vhost_user_log), true },
    [VHOST_USER_SET_LOG_FD] = { "SET_LOG_FD", VHOST_USER_SIZE_ANY, false },
    [VHOST_USER_SET_VRING_NUM] = { "SET_VRING_NUM", sizeof(struct vhost_vring_state), false },
    [VHOST_USER_SET_VRING_ADDR] = { "SET_VRING_ADDR", sizeof(struct vhost_vring_addr), false },
    [VHOST_USER_SET_VRING_BASE] = { "SET_VRING_BASE", sizeof(struct vhost_vring_state), false },
    [VHOST_USER_GET_VRING_BASE] = { "GET_VRING_BASE", sizeof(struct vhost_vring_state), true },
    [VHOST_USER_SET_VRING_KICK] = { "SET_VRING_KICK", sizeof(uint64_t), false },
    [VHOST_USER_SET_VRING_CALL] = { "SET_VRING_CALL", sizeof(uint64_t), false },
    [VHOST_USER_SET_VRING_ERR] = { "SET_VRING_ERR", sizeof(uint64_t), false },
    [VHOST_USER_GET_PROTOCOL_FEATURES] = { "GET_PROTOCOL_FEATURES", 0, true },
    [VHOST_USER_SET_PROTOCOL_FEATURES] = { "SET_PROTOCOL_FEATURES", sizeof(uint64_t), false },
    [VHOST_USER_GET_QUEUE_NUM] = { "GET_QUEUE_NUM", 0, true },
    [VHOST_USER_SET_VRING_ENABLE] = { "SET_VRING_ENABLE", sizeof(struct vhost_vring_state), false },
    [VHOST_USER_SEND_RARP] = { "SEND_RARP", VHOST_USER_SIZE_ANY, false },
    [VHOST_USER_NET_SET_MTU] = { "NET_SET_MTU", VHOST_USER_SIZE_ANY, false },
    [VHOST_USER_SET_BACKEND_REQ_FD] = { "SET_BACKEND_REQ_FD", 0, false },
    [VHOST_USER_IOTLB_MSG] = { "IOTLB_MSG", VHOST_USER_SIZE_ANY, true },
    [VHOST_USER_SET_VRING_ENDIAN] = { "SET_VRING_ENDIAN", VHOST_USER_SIZE_ANY, false },
    [VHOST_USER_GET_CONFIG] = { "GET_CONFIG", VHOST_USER_SIZE_ANY, true },
    [VHOST_USER_SET_CONFIG] = { "SET_CONFIG", VHOST_USER_SIZE_ANY, false },
    [VHOST_USER_CREATE_CRYPTO_SESSION] = { "CREATE_CRYPTO_SESSION", VHOST_USER_SIZE_ANY, true },
    [VHOST_USER_CLOSE_CRYPTO_SESSION] = { "CLOSE_CRYPTO_SESSION", VHOST_USER_SIZE_ANY, false },
    [VHOST_USER_POSTCOPY_ADVISE] = { "POSTCOPY_ADVISE", VHOST_USER_SIZE_ANY, true },
    [VHOST_USER_POSTCOPY_LISTEN] = { "POSTCOPY_LISTEN", VHOST_USER_SIZE_ANY, false },
    [VHOST_USER_POSTCOPY_END] = { "POSTCOPY_END", VHOST_USER_SIZE_ANY, true },
    [VHOST_USER_GET_INFLIGHT_FD] = { "GET_INFLIGHT_FD", sizeof(struct vhost_user_inflight), true },
    [VHOST_USER_SET_INFLIGHT_FD] = { "SET_INFLIGHT_FD", sizeof(struct vhost_user_inflight), false },
    [VHOST_USER_GPU_SET_SOCKET] = { "GPU_SET_SOCKET", VHOST_USER_SIZE_ANY, false },
    [VHOST_USER_RESET_DEVICE] = { "RESET_DEVICE", 0, false },
    [VHOST_USER_VRING_KICK] = { "VRING_KICK", VHOST_USER_SIZE_ANY, false },
    [VHOST_USER_GET_MAX_MEM_SLOTS] = { "GET_MAX_MEM_SLOTS", 0, true },
    [VHOST_USER_ADD_MEM_REG] = { "ADD_MEM_REG", sizeof(struct vhost_user_mem_reg), false },
    [VHOST_USER_REM_MEM_REG] = { "REM_MEM_REG", sizeof(struct vhost_user_mem_reg), false },
    [VHOST_USER_SET_STATUS] = { "SET_STATUS", sizeof(uint64_t), false },
    [VHOST_USER_GET_STATUS] = { "GET_STATUS", 0, true },
    [VHOST_USER_GET_SHARED_OBJECT] = { "GET_SHARED_OBJECT", VHOST_USER_SIZE_ANY, true },
    [VHOST_USER_SET_DEVICE_STATE_FD] = { "SET_DEVICE_STATE_FD", VHOST_USER_SIZE_ANY, true },
    [VHOST_USER_CHECK_DEVICE_STATE] = { "CHECK_DEVICE_STATE", VHOST_USER_SIZE_ANY, true },
};

static const struct vhost_user_request_info *info(uint32_t req)
{
    return req < VHOST_USER_MAX && requests[req].name ? &requests[req] : NULL;
}

const char *vhost_user_request_name(uint32_t req)
{
    return info(req) ? info(req)->name : "UNKNOWN";
}

int vhost_user_request_size(uint32_t req)
{
    return info(req) ? info(req)->size : VHOST_USER_SIZE_ANY;
}

bool vhost_user_request_replies(uint32_t req)
{
    return info(req) && info(req)->replies;
}

ssize_t vhost_user_sendmsg(int sock, const void *buf, size_t len, const int *fds, unsigned nfds,
                           int flags)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * VHOST_USER_SENDMSG_MAX_FDS)];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = { (void *)buf, len };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    ssize_t n;

    if (nfds > VHOST_USER_SENDMSG_MAX_FDS) {
        return -EINVAL;
    }
    if (nfds) {
        struct cmsghdr *c;

        memset(&ctl, 0, sizeof(ctl));
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    do {
        n = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

ssize_t vhost_user_recvmsg(int sock, void *buf, size_t len, int *fds, unsigned max_fds,
                           unsigned *nfds, bool *fds_lost, int flags)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * VHOST_USER_SENDMSG_MAX_FDS)];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = { buf, len };
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
        .msg_controllen = sizeof(ctl.buf),
    };
    ssize_t n;

    do {
        n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        size_t count;

        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;

            /* CMSG_DATA need not be aligned for int. */
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
            if (*nfds < max_fds) {
                fds[(*nfds)++] = fd;
            } else {
                close(fd);
                *fds_lost = true;
            }
        }
    }
    /* The kernel closed what did not fit the control buffer. */
    if (mh.msg_flags & MSG_CTRUNC) {
        *fds_lost = true;
    }
    return n;
}
