// agent-gateway-fs-guard: runs the gateway (argv[1..]) under a seccomp filter that refuses the
// btrfs ioctls making a subvolume or a snapshot (decision 0244). On a limited volume (decision
// 0216) a subvolume that the agent's code makes inside its workspace gets a qgroup of its own,
// in no group of the platform's, so nothing limits what is written there: measured, 200 MiB
// past a 64 MiB limit as the gateway's user. btrfs lets any user who may write a folder make one;
// no mount option or capability stops it. The filter stacks on Docker's own profile, is
// inherited by every process the gateway starts, and cannot be lifted.
//
// Also refused: every system call of another ABI (i386 or x32 on x86_64), so that the ioctl
// cannot go round the filter under another number. The gateway and its tools are 64-bit.
// Static (gcc -static): the image has no C library of its own to link against.

#include <errno.h>
#include <linux/audit.h>
#include <linux/btrfs.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "fs-guard: unknown architecture"
#endif

#define REFUSE BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
#define ALLOW BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
#define REFUSE_CMD(cmd, to_refuse) \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)(cmd), (to_refuse), 0)

static struct sock_filter filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
    REFUSE,
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#if defined(__x86_64__)
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, __X32_SYSCALL_BIT, 0, 1),
    REFUSE,
#endif
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 1, 0),
    ALLOW,
    // The request's low 32 bits (little-endian): the kernel reads it as an unsigned int.
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
    REFUSE_CMD(BTRFS_IOC_SUBVOL_CREATE, 4),
    REFUSE_CMD(BTRFS_IOC_SUBVOL_CREATE_V2, 3),
    REFUSE_CMD(BTRFS_IOC_SNAP_CREATE, 2),
    REFUSE_CMD(BTRFS_IOC_SNAP_CREATE_V2, 1),
    ALLOW,
    REFUSE,
};

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s COMMAND [ARG]...\n", argv[0]);
    return 64;
  }
  struct sock_fprog program = {
      .len = (unsigned short)(sizeof filter / sizeof filter[0]),
      .filter = filter,
  };
  // no_new_privs: required to load a filter without CAP_SYS_ADMIN; the image has no setuid file.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    perror("agent-gateway-fs-guard: seccomp");
    return 126;
  }
  execvp(argv[1], argv + 1);
  perror(argv[1]);
  return 127;
}
