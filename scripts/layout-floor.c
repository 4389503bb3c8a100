/* The floor of DESIGN §6b's workspace layout, for scripts/bench.sh section 9: the least
 * CPU any tool that keeps the layout spends per item, done by one thread with no runtime,
 * no journal format, no checks. It is not the runner and is not a way to run a batch.
 *
 * For each item: mkdir teammates/t<N>/ and its work/ (0700), write the working-context
 * skeleton, journal "started", spawn the agent as the leader of its own process group with
 * the prompt (PROMPT_BYTES bytes, about the runner's own) on stdin through a pipe, stdout
 * and stderr on pipes read to their end, and RUNNER_REPORT naming work/report.json. Once the
 * agent has exited and its pipes have closed: read the report (O_NOFOLLOW), journal
 * "finished", append one record line to completed.jsonl, unlink the report and the
 * skeleton, rmdir both folders. SLOTS agents at once.
 *
 * usage: layout-floor ROWS DIR AGENT      exit 0 when every row was recorded, 3 on an error
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLOTS 8
#define PROMPT_BYTES 2600

extern char **environ;

struct slot {
    pid_t pid;
    int item, out, err, exited;
    char folder[512];
};

static struct slot slots[SLOTS];
static int journal, record, next_item, rows, running;
static const char *dir, *agent;
static char prompt_head[PROMPT_BYTES];

static void fail(const char *what) {
    perror(what);
    exit(3);
}

static void put(int fd, const char *s, int n) {
    if (n < 0 || write(fd, s, n) != n) fail("write");
}

static void start(struct slot *s) {
    char path[600], line[256], report_var[640];
    s->item = next_item++;
    snprintf(s->folder, sizeof s->folder, "%s/teammates/t%d", dir, s->item);
    if (mkdir(s->folder, 0700)) fail("mkdir");
    snprintf(path, sizeof path, "%s/work", s->folder);
    if (mkdir(path, 0700)) fail("mkdir");
    snprintf(path, sizeof path, "%s/work/working-context.md", s->folder);
    int f = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (f < 0) fail("open");
    const char *skeleton = "# Working context\n\n## Goal\n\n## Done so far\n\n## Next\n";
    put(f, skeleton, strlen(skeleton));
    close(f);
    put(journal, line, snprintf(line, sizeof line, "{\"event\":\"attempt_started\",\"id\":\"%d\"}\n", s->item));

    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) fail("pipe2");
    put(in[1], prompt_head, sizeof prompt_head);
    put(in[1], line, snprintf(line, sizeof line, "Item %d.\n", s->item));
    close(in[1]);

    snprintf(report_var, sizeof report_var, "RUNNER_REPORT=%s/work/report.json", s->folder);
    char *envp[512];
    int k = 0;
    for (char **e = environ; *e && k < 510; e++) envp[k++] = *e;
    envp[k++] = report_var;
    envp[k] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    char *argv[] = {(char *)agent, NULL};
    if (posix_spawn(&s->pid, agent, &fa, &attr, argv, envp)) fail("posix_spawn");
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    s->out = out[0];
    s->err = err[0];
    s->exited = 0;
    running++;
}

static void finish(struct slot *s) {
    char path[600], report[4096], line[5000];
    snprintf(path, sizeof path, "%s/work/report.json", s->folder);
    int f = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (f < 0) fail("open report");
    ssize_t n = read(f, report, sizeof report - 1);
    close(f);
    report[n > 0 ? n : 0] = 0;
    put(journal, line, snprintf(line, sizeof line, "{\"event\":\"item_finished\",\"id\":\"%d\",\"report\":%s}\n", s->item, report));
    put(record, line, snprintf(line, sizeof line, "{\"id\":\"%d\",\"prompt\":\"Item %d.\",\"report\":%s}\n", s->item, s->item, report));
    if (unlink(path)) fail("unlink");
    snprintf(path, sizeof path, "%s/work/working-context.md", s->folder);
    if (unlink(path)) fail("unlink");
    snprintf(path, sizeof path, "%s/work", s->folder);
    if (rmdir(path) || rmdir(s->folder)) fail("rmdir");
    s->pid = 0;
    running--;
    if (next_item < rows) start(s);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: layout-floor ROWS DIR AGENT\n");
        return 2;
    }
    rows = atoi(argv[1]);
    dir = argv[2];
    agent = argv[3];
    memset(prompt_head, 'x', sizeof prompt_head);
    char path[600];
    snprintf(path, sizeof path, "%s/teammates", dir);
    if (mkdir(dir, 0700) || mkdir(path, 0700)) fail("mkdir");
    snprintf(path, sizeof path, "%s/journal.jsonl", dir);
    journal = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    snprintf(path, sizeof path, "%s/completed.jsonl", dir);
    record = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (journal < 0 || record < 0) fail("open");
    for (int i = 0; i < SLOTS && next_item < rows; i++) start(&slots[i]);

    char buf[65536];
    while (running) {
        struct pollfd fds[2 * SLOTS];
        int owner[2 * SLOTS], nfds = 0;
        for (int i = 0; i < SLOTS; i++) {
            if (!slots[i].pid) continue;
            if (slots[i].out >= 0) { fds[nfds] = (struct pollfd){slots[i].out, POLLIN, 0}; owner[nfds++] = i; }
            if (slots[i].err >= 0) { fds[nfds] = (struct pollfd){slots[i].err, POLLIN, 0}; owner[nfds++] = i; }
        }
        if (nfds && poll(fds, nfds, -1) < 0) fail("poll");
        for (int j = 0; j < nfds; j++) {
            if (!fds[j].revents) continue;
            struct slot *s = &slots[owner[j]];
            if (read(fds[j].fd, buf, sizeof buf) <= 0) {
                close(fds[j].fd);
                if (fds[j].fd == s->out) s->out = -1; else s->err = -1;
            }
        }
        /* The pipes close as the agent exits: wait for each whose pipes have closed. */
        int status;
        for (int i = 0; i < SLOTS; i++) {
            struct slot *s = &slots[i];
            if (s->pid && s->out < 0 && s->err < 0) {
                if (!s->exited && waitpid(s->pid, &status, 0) != s->pid) fail("waitpid");
                s->exited = 1;
                finish(s);
            }
        }
    }
    return 0;
}
