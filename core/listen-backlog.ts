/**
 * Pending connections the kernel queues for each listening socket (MQTT and HTTP) before we
 * accept them; the kernel caps it at net.core.somaxconn (4096 on these machines). Node's default
 * of 511 overflowed when 10,000 devices reconnected or fetched an image at once: the kernel
 * dropped the SYNs and the devices retried after 1, 3 and 7 s (654,000 listen overflows counted
 * in one OTA benchmark run, CPUs half idle).
 */
export const LISTEN_BACKLOG = 4096;
