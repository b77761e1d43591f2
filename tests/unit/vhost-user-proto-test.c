/*
 * Specification of the vhost-user request table (hw/virtio/vhost-user-proto.c)
 * that the server validates with and the front-end frames with: a request's
 * name, the payload it must carry, and whether it is always answered.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "vhost-user-proto.h"

static void test_every_get_request_is_answered(void)
{
    unsigned gets = 0;

    for (uint32_t r = 0; r < VHOST_USER_MAX; r++) {
        const char *name = vhost_user_request_name(r);

        if (g_str_has_prefix(name, "GET_")) {
            g_assert_true(vhost_user_request_replies(r));
            gets++;
        }
    }
    g_assert_cmpuint(gets, >=, 7);
}

static void test_set_requests_are_answered_only_on_request(void)
{
    g_assert_false(vhost_user_request_replies(VHOST_USER_SET_FEATURES));
    g_assert_false(vhost_user_request_replies(VHOST_USER_SET_MEM_TABLE));
    g_assert_false(vhost_user_request_replies(VHOST_USER_SET_VRING_KICK));
    g_assert_false(vhost_user_request_replies(VHOST_USER_SET_VRING_ENABLE));
}

static void test_payload_sizes(void)
{
    g_assert_cmpint(vhost_user_request_size(VHOST_USER_GET_FEATURES), ==, 0);
    g_assert_cmpint(vhost_user_request_size(VHOST_USER_SET_FEATURES), ==, sizeof(uint64_t));
    g_assert_cmpint(vhost_user_request_size(VHOST_USER_GET_VRING_BASE), ==,
                    sizeof(struct vhost_vring_state));
    g_assert_cmpint(vhost_user_request_size(VHOST_USER_SET_VRING_ADDR), ==,
                    sizeof(struct vhost_vring_addr));
    g_assert_cmpint(vhost_user_request_size(VHOST_USER_ADD_MEM_REG), ==,
                    sizeof(struct vhost_user_mem_reg));
    g_assert_cmpint(vhost_user_request_size(VHOST_USER_SET_INFLIGHT_FD), ==,
                    sizeof(struct vhost_user_inflight));
    g_assert_cmpint(vhost_user_request_size(VHOST_USER_SET_MEM_TABLE), ==,
                    VHOST_USER_SIZE_MEM_TABLE);
    /* Not interpreted, so not checked. */
    g_assert_cmpint(vhost_user_request_size(VHOST_USER_SET_CONFIG), ==, VHOST_USER_SIZE_ANY);
}

static void test_unknown_numbers(void)
{
    uint32_t r = VHOST_USER_MAX + 7;

    g_assert_cmpstr(vhost_user_request_name(r), ==, "UNKNOWN");
    g_assert_cmpint(vhost_user_request_size(r), ==, VHOST_USER_SIZE_ANY);
    g_assert_false(vhost_user_request_replies(r));
    g_assert_cmpstr(vhost_user_request_name(UINT32_MAX), ==, "UNKNOWN");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/vhost-user-proto/every-get-request-is-answered",
                    test_every_get_request_is_answered);
    g_test_add_func("/vhost-user-proto/set-requests-are-answered-only-on-request",
                    test_set_requests_are_answered_only_on_request);
    g_test_add_func("/vhost-user-proto/payload-sizes", test_payload_sizes);
    g_test_add_func("/vhost-user-proto/unknown-numbers", test_unknown_numbers);
    return g_test_run();
}
