/* The pod sandbox's process for the local cluster (tests/cluster/images.sh builds it
 * statically into the sandbox image that containerd's sandbox_image names). It holds
 * the pod's namespaces open until it is told to stop, and reaps the zombies a shared
 * PID namespace would leave behind. Written for this project, not taken from elsewhere. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signal_number) {
    (void)signal_number;
    _exit(0);
}

static void reap(int signal_number) {
    (void)signal_number;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction on_stop = {.sa_handler = stop};
    struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    sigaction(SIGINT, &on_stop, NULL);
    sigaction(SIGTERM, &on_stop, NULL);
    sigaction(SIGCHLD, &on_child, NULL);
    for (;;) {
        pause();
    }
    return EXIT_SUCCESS;
}
