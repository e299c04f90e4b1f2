/*
 * Preloaded by `make simulate` in front of libsocket_wrapper, which gives each simulated pod a network of its own.
 *
 * libsocket_wrapper names a socket after its address and port, and picks the port of a bind to port 0 (and of the
 * implicit bind in connect() and listen()) as the first name that no file holds yet, then unlinks that path and
 * binds it. Two processes of one pod doing so at the same moment can pick the same name, and the later one then
 * takes the earlier one's listening socket away: a peer that connects to the earlier one reaches the wrong process
 * or is refused. A kernel never hands one port to two listeners. This library makes the pick and the bind one step,
 * under a lock file in SOCKET_WRAPPER_DIR (between processes) and a mutex (between threads); every other call goes
 * straight to libsocket_wrapper.
 *
 * It also makes a listener on the IPv6 wildcard "::" answer IPv4 connections to the pod's address, as Linux's
 * dual-stack sockets do (net.ipv6.bindv6only 0, the default; torch's TCPStore listens on "::" through libuv).
 * libsocket_wrapper names an IPv4 socket T<iface><port> and an IPv6 one X<iface><port>, so without this an IPv4
 * client finds only what an earlier process left under the T name: libsocket_wrapper never removes the file of an
 * explicitly bound socket, and a connection to it is refused. torch's store client tries IPv6 first, takes "No route
 * to host" (libsocket_wrapper's answer where no file exists) as final for IPv6, then retries a refused IPv4
 * connection until its timeout: a store that started a moment after its clients was never reached when an earlier
 * process of the pod had used the port (an elastic world re-forming; docs/simulate.md).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

static pthread_mutex_t names_mutex = PTHREAD_MUTEX_INITIALIZER;
static int lock_fd = -1;
static pid_t lock_pid = 0;

static void names_lock(void)
{
    pthread_mutex_lock(&names_mutex);
    if (lock_fd < 0 || lock_pid != getpid()) { /* a forked child needs its own open file (flock is per open file) */
        const char *dir = getenv("SOCKET_WRAPPER_DIR");
        char path[PATH_MAX];
        if (lock_fd >= 0) {
            close(lock_fd);
        }
        lock_fd = -1;
        if (dir != NULL && snprintf(path, sizeof(path), "%s/.names.lock", dir) < (int)sizeof(path)) {
            lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        }
        lock_pid = getpid();
    }
    if (lock_fd >= 0) {
        while (flock(lock_fd, LOCK_EX) == -1 && errno == EINTR) {
        }
    }
}

static void names_unlock(void)
{
    if (lock_fd >= 0) {
        flock(lock_fd, LOCK_UN);
    }
    pthread_mutex_unlock(&names_mutex);
}

static int is_inet(const struct sockaddr *addr, socklen_t len)
{
    return addr != NULL && len >= (socklen_t)sizeof(sa_family_t) &&
           (addr->sa_family == AF_INET || addr->sa_family == AF_INET6);
}

static int port_zero(const struct sockaddr *addr, socklen_t len)
{
    if (!is_inet(addr, len)) {
        return 0;
    }
    if (addr->sa_family == AF_INET) {
        return len >= (socklen_t)sizeof(struct sockaddr_in) && ((const struct sockaddr_in *)addr)->sin_port == 0;
    }
    return len >= (socklen_t)sizeof(struct sockaddr_in6) && ((const struct sockaddr_in6 *)addr)->sin6_port == 0;
}

/* Return the call's result with the name lock held around it, keeping the call's errno. */
#define RETURN_LOCKED(call) \
    do { \
        int rc_, errno_; \
        names_lock(); \
        rc_ = (call); \
        errno_ = errno; \
        names_unlock(); \
        errno = errno_; \
        return rc_; \
    } while (0)

/* Each wrapper calls the next definition of its symbol: libsocket_wrapper's, preloaded after this library. */
typedef int (*addr_call)(int, const struct sockaddr *, socklen_t);
typedef int (*listen_call)(int, int);

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    static addr_call next_;
    if (next_ == NULL) {
        next_ = (addr_call)dlsym(RTLD_NEXT, "bind");
    }
    if (!port_zero(addr, len)) {
        return next_(fd, addr, len);
    }
    RETURN_LOCKED(next_(fd, addr, len));
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    static addr_call next_;
    if (next_ == NULL) {
        next_ = (addr_call)dlsym(RTLD_NEXT, "connect");
    }
    if (!is_inet(addr, len)) {
        return next_(fd, addr, len);
    }
    RETURN_LOCKED(next_(fd, addr, len));
}

/* After a listen() on "::" port P: the IPv4 name T<iface><P> becomes a second link to the socket's file
 * X<iface><P> (a Unix socket is reached through any link to its file), replacing whatever file held the name. */
static void answer_ipv4_too(int fd)
{
    struct sockaddr_in6 me;
    socklen_t len = sizeof(me);
    const char *dir = getenv("SOCKET_WRAPPER_DIR");
    const char *iface_env = getenv("SOCKET_WRAPPER_DEFAULT_IFACE");
    char v6[PATH_MAX], v4[PATH_MAX], tmp[PATH_MAX];
    unsigned iface, port;

    if (dir == NULL || iface_env == NULL || getsockname(fd, (struct sockaddr *)&me, &len) != 0 ||
        len < (socklen_t)sizeof(me) || me.sin6_family != AF_INET6 || !IN6_IS_ADDR_UNSPECIFIED(&me.sin6_addr)) {
        return;
    }
    iface = (unsigned)atoi(iface_env);
    port = ntohs(me.sin6_port);
    if (iface == 0 || iface > 0xFF || port == 0 ||
        snprintf(v6, sizeof(v6), "%s/X%02X%04X", dir, iface, port) >= (int)sizeof(v6) ||
        snprintf(v4, sizeof(v4), "%s/T%02X%04X", dir, iface, port) >= (int)sizeof(v4) ||
        snprintf(tmp, sizeof(tmp), "%s/.dual-%d-%d", dir, (int)getpid(), fd) >= (int)sizeof(tmp)) {
        return;
    }
    unlink(tmp);
    if (link(v6, tmp) == 0 && rename(tmp, v4) != 0) { /* rename: the name never goes missing in between */
        unlink(tmp);
    }
}

int listen(int fd, int backlog)
{
    static listen_call next_;
    int rc, errno_;
    if (next_ == NULL) {
        next_ = (listen_call)dlsym(RTLD_NEXT, "listen");
    }
    names_lock();
    rc = next_(fd, backlog);
    errno_ = errno;
    if (rc == 0) {
        answer_ipv4_too(fd);
    }
    names_unlock();
    errno = errno_;
    return rc;
}
