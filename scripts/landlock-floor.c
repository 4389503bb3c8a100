/* The floor of a confined attempt (issue 49, BENCHMARKS.md's sandbox notes): the least CPU
 * any confinement of DESIGN §10's shape costs per attempt, on this machine, done by one
 * small C process with nothing else to do. It is not the runner.
 *
 * Each iteration starts PROGRAM (default /bin/true) once and waits for it, in one of these
 * ways ("the ruleset": the one `sandbox::ruleset` makes — every write right of the kernel's
 * Landlock ABI handled, signals and abstract sockets scoped, the write rights but MakeChar,
 * MakeBlock and IoctlDev granted beneath the working directory, a teammate folder and the
 * seven devices of `sandbox::DEVICES`):
 *
 *   plain     fork, exec                                     (an unconfined spawn)
 *   ruleset   fork; the child builds the ruleset, setsid, no_new_privs, restricts itself
 *             and execs                                      (confining, nothing shared)
 *   prebuilt  the ruleset built once; fork; the child setsid, no_new_privs, restricts
 *             itself with the inherited descriptor and execs (only landlock_restrict_self)
 *   keeper    fork a keeper, which builds the ruleset, becomes a child subreaper, forks the
 *             agent's process (setsid, no_new_privs, restrict, exec), waits for it and
 *             exits                                          (the shape of `sandbox::shim`)
 *   keeper-prebuilt  the same with the ruleset built once by the parent
 *
 * For each mode, ROUNDS rounds of N iterations, the modes alternating within a round; it
 * prints per mode the median over the rounds of the wall and CPU (user + system of this
 * process and everything it waited for) per iteration, and the CPU over `plain`.
 *
 * usage: landlock-floor [N [ROUNDS [PROGRAM]]]      (defaults 1000, 5, /bin/true)
 * Build: cc -O2 -o landlock-floor scripts/landlock-floor.c. Exit 3 when Landlock ABI < 6.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Newer than some systems' headers: the values of the kernel's uapi. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* Write rights of ABI 6 and later (`AccessFs::from_write`): all but execute and the reads. */
#define WRITE_RIGHTS                                                                       \
    (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                       \
     LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |                       \
     LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |                           \
     LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |                         \
     LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER | \
     LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define GRANTED                                                                            \
    (WRITE_RIGHTS &                                                                        \
     ~(LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_IOCTL_DEV))
/* The rights that apply to a file (not a directory) in a rule. */
#define FILE_RIGHTS                                                                        \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE | \
     LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

/* The ruleset's attribute as ABI 6 reads it (the scope field came with it). */
struct attr {
    uint64_t handled_access_fs, handled_access_net, scoped;
};

static const char *paths[] = {
    NULL, NULL, /* the working directory and the teammate folder, filled in main */
    "/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/urandom", "/dev/random", "/dev/shm",
};
static const char *program;

static void die(const char *what) {
    perror(what);
    _exit(3);
}

/* The ruleset, as `sandbox::ruleset` makes it: the paths that exist, opened O_PATH. */
static int ruleset(void) {
    struct attr a = {WRITE_RIGHTS, 0, LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL};
    int fd = (int)syscall(SYS_landlock_create_ruleset, &a, sizeof a, 0);
    if (fd < 0) die("landlock_create_ruleset");
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0) continue;
        int p = open(paths[i], O_PATH | O_CLOEXEC);
        if (p < 0) continue;
        struct landlock_path_beneath_attr rule = {
            .allowed_access = S_ISDIR(st.st_mode) ? GRANTED : (GRANTED & FILE_RIGHTS),
            .parent_fd = p,
        };
        if (syscall(SYS_landlock_add_rule, fd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0)
            die("landlock_add_rule");
        close(p);
    }
    return fd;
}

/* The agent's process before its exec: a session, no_new_privs, the domain; then exec. */
static void confine_and_exec(int rs) {
    if (setsid() < 0) die("setsid");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs");
    if (syscall(SYS_landlock_restrict_self, rs, 0) != 0) die("landlock_restrict_self");
    char *argv[] = {(char *)program, NULL};
    execve(program, argv, environ);
    die("execve");
}

static void wait_for(pid_t pid) {
    int status;
    while (waitpid(pid, &status, 0) < 0) {}
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "landlock-floor: the child failed (status %d)\n", status);
        _exit(3);
    }
}

/* A keeper: subreaper, fork the agent's process, wait for it, exit. */
static void keeper(int prebuilt) {
    int rs = prebuilt >= 0 ? prebuilt : ruleset();
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    pid_t agent = fork();
    if (agent < 0) die("fork");
    if (agent == 0) confine_and_exec(rs);
    close(rs);
    wait_for(agent);
    _exit(0);
}

enum mode { PLAIN, RULESET, PREBUILT, KEEPER, KEEPER_PREBUILT, MODES };
static const char *names[] = {"plain", "ruleset", "prebuilt", "keeper", "keeper-prebuilt"};

static void once(enum mode m, int prebuilt) {
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        switch (m) {
        case PLAIN: {
            char *argv[] = {(char *)program, NULL};
            execve(program, argv, environ);
            die("execve");
            break;
        }
        case RULESET: confine_and_exec(ruleset()); break;
        case PREBUILT: confine_and_exec(prebuilt); break;
        case KEEPER: keeper(-1); break;
        case KEEPER_PREBUILT: keeper(prebuilt); break;
        default: _exit(3);
        }
    }
    wait_for(pid);
}

static double cpu_now(void) {
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    return self.ru_utime.tv_sec + self.ru_stime.tv_sec + kids.ru_utime.tv_sec +
           kids.ru_stime.tv_sec +
           (self.ru_utime.tv_usec + self.ru_stime.tv_usec + kids.ru_utime.tv_usec +
            kids.ru_stime.tv_usec) / 1e6;
}

static double wall_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000, rounds = argc > 2 ? atoi(argv[2]) : 5;
    program = argc > 3 ? argv[3] : "/bin/true";
    if (n < 1 || rounds < 1 || rounds > 99) {
        fprintf(stderr, "usage: landlock-floor [N [ROUNDS [PROGRAM]]]\n");
        return 2;
    }
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 6) {
        fprintf(stderr, "landlock-floor: Landlock ABI %ld, 6 needed\n", abi);
        return 3;
    }
    static char cwd[4096], folder[] = "/tmp/landlock-floor-XXXXXX";
    if (!getcwd(cwd, sizeof cwd) || !mkdtemp(folder)) die("folders");
    paths[0] = cwd;
    paths[1] = folder;
    int prebuilt = ruleset();
    double wall[MODES][99], cpu[MODES][99];
    for (int r = 0; r < rounds; r++) {
        for (int m = 0; m < MODES; m++) {
            double w0 = wall_now(), c0 = cpu_now();
            for (int i = 0; i < n; i++) once((enum mode)m, prebuilt);
            wall[m][r] = (wall_now() - w0) * 1e3 / n;
            cpu[m][r] = (cpu_now() - c0) * 1e3 / n;
        }
    }
    rmdir(folder);
    printf("landlock ABI %ld, %d x %d iterations of %s; ms per iteration, medians of the rounds\n",
           abi, rounds, n, program);
    double base = 0;
    for (int m = 0; m < MODES; m++) {
        qsort(wall[m], rounds, sizeof(double), by_value);
        qsort(cpu[m], rounds, sizeof(double), by_value);
        double w = wall[m][rounds / 2], c = cpu[m][rounds / 2];
        if (m == PLAIN) base = c;
        printf("%-16s wall %.3f  cpu %.3f (%.3f-%.3f)  cpu over plain %+.3f\n", names[m], w, c,
               cpu[m][0], cpu[m][rounds - 1], c - base);
    }
    return 0;
}
