/* Compiled by tests/c_abi.rs with -Wall -Wextra -Werror against include/mpi_interface.h:
 * the sizes and offsets below are those of MPICH's header on LP64 Linux. */
#include "mpi_interface.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

_Static_assert(sizeof(mqs_taddr_t) == 8, "mqs_taddr_t is unsigned long");
_Static_assert(sizeof(mqs_tword_t) == 8, "mqs_tword_t is long");
_Static_assert(sizeof(mqs_target_type_sizes) == 20, "mqs_target_type_sizes");
_Static_assert(offsetof(mqs_target_type_sizes, pointer_size) == 16, "pointer_size");
_Static_assert(sizeof(mqs_communicator) == 88, "mqs_communicator");
_Static_assert(offsetof(mqs_communicator, local_rank) == 8, "local_rank");
_Static_assert(offsetof(mqs_communicator, size) == 16, "size");
_Static_assert(offsetof(mqs_communicator, name) == 24, "name");
_Static_assert(sizeof(mqs_pending_operation) == 416, "mqs_pending_operation");
_Static_assert(offsetof(mqs_pending_operation, status) == 0, "status");
_Static_assert(offsetof(mqs_pending_operation, desired_local_rank) == 8, "desired_local_rank");
_Static_assert(offsetof(mqs_pending_operation, desired_global_rank) == 16, "desired_global_rank");
_Static_assert(offsetof(mqs_pending_operation, tag_wild) == 24, "tag_wild");
_Static_assert(offsetof(mqs_pending_operation, desired_tag) == 32, "desired_tag");
_Static_assert(offsetof(mqs_pending_operation, desired_length) == 40, "desired_length");
_Static_assert(offsetof(mqs_pending_operation, system_buffer) == 48, "system_buffer");
_Static_assert(offsetof(mqs_pending_operation, buffer) == 56, "buffer");
_Static_assert(offsetof(mqs_pending_operation, actual_local_rank) == 64, "actual_local_rank");
_Static_assert(offsetof(mqs_pending_operation, actual_global_rank) == 72, "actual_global_rank");
_Static_assert(offsetof(mqs_pending_operation, actual_tag) == 80, "actual_tag");
_Static_assert(offsetof(mqs_pending_operation, actual_length) == 88, "actual_length");
_Static_assert(offsetof(mqs_pending_operation, extra_text) == 96, "extra_text");
_Static_assert(sizeof(mqs_basic_callbacks) == 64, "mqs_basic_callbacks");
_Static_assert(offsetof(mqs_basic_callbacks, mqs_get_process_info_fp) == 56, "basic order");
_Static_assert(sizeof(mqs_image_callbacks) == 48, "mqs_image_callbacks");
_Static_assert(offsetof(mqs_image_callbacks, mqs_sizeof_fp) == 40, "image order");
_Static_assert(sizeof(mqs_process_callbacks) == 32, "mqs_process_callbacks");
_Static_assert(offsetof(mqs_process_callbacks, mqs_target_to_host_fp) == 24, "process order");
_Static_assert(sizeof(mqs_lang_code) == 4, "mqs_lang_code");
_Static_assert(mqs_lang_c == 'c' && mqs_lang_cplus == 'C' && mqs_lang_f77 == 'f' && mqs_lang_f90 == 'F', "languages");
_Static_assert(mqs_pending_sends == 0 && mqs_pending_receives == 1 && mqs_unexpected_messages == 2, "classes");
_Static_assert(mqs_st_pending == 0 && mqs_st_matched == 1 && mqs_st_complete == 2, "status");
_Static_assert(mqs_ok == 0 && mqs_no_information == 1 && mqs_end_of_list == 2 && mqs_first_user_code == 100, "codes");
_Static_assert(MQS_INTERFACE_COMPATIBILITY == 2 && MQS_INVALID_PROCESS == -1, "versions");

/* The prototypes are MPICH's, checked without linking against the library. */
#define SAME_TYPE(fn, type) _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), type), #fn)
SAME_TYPE(mqs_image_has_queues, int (*)(mqs_image *, const char **));
SAME_TYPE(mqs_process_has_queues, int (*)(mqs_process *, char **));
SAME_TYPE(mqs_dll_error_string, const char *(*)(int));
SAME_TYPE(mqs_version_string, const char *(*)(void));
SAME_TYPE(mqs_setup_basic_callbacks, void (*)(const mqs_basic_callbacks *));
SAME_TYPE(mqs_setup_image, int (*)(mqs_image *, const mqs_image_callbacks *));
SAME_TYPE(mqs_setup_process, int (*)(mqs_process *, const mqs_process_callbacks *));
SAME_TYPE(mqs_get_comm_group, int (*)(mqs_process *, int *));
SAME_TYPE(mqs_get_communicator, int (*)(mqs_process *, mqs_communicator *));
SAME_TYPE(mqs_setup_operation_iterator, int (*)(mqs_process *, int));
SAME_TYPE(mqs_next_operation, int (*)(mqs_process *, mqs_pending_operation *));
SAME_TYPE(mqs_destroy_image_info, void (*)(mqs_image_info *));
SAME_TYPE(mqs_destroy_process_info, void (*)(mqs_process_info *));

static const char *const names[] = {
    "mqs_setup_basic_callbacks", "mqs_version_string", "mqs_version_compatibility",
    "mqs_dll_taddr_width", "mqs_dll_error_string", "mqs_setup_image", "mqs_image_has_queues",
    "mqs_destroy_image_info", "mqs_setup_process", "mqs_process_has_queues",
    "mqs_destroy_process_info", "mqs_update_communicator_list",
    "mqs_setup_communicator_iterator", "mqs_get_communicator", "mqs_get_comm_group",
    "mqs_next_communicator", "mqs_setup_operation_iterator", "mqs_next_operation",
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
        return 2;
    }
    void *dll = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!dll) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    size_t found = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (dlsym(dll, names[i]))
            found++;
        else
            fprintf(stderr, "missing %s\n", names[i]);
    }
    int (*compat)(void) = (int (*)(void))dlsym(dll, "mqs_version_compatibility");
    int (*width)(void) = (int (*)(void))dlsym(dll, "mqs_dll_taddr_width");
    if (!compat || !width || compat() != 2 || width() != (int)sizeof(mqs_taddr_t)) {
        fprintf(stderr, "wrong version or width\n");
        return 1;
    }
    printf("found %zu of 18 entry points\n", found);
    return found == 18 ? 0 : 1;
}
