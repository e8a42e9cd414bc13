// Package pgcluster starts and stops a local PostgreSQL cluster from the
// PostgreSQL binaries installed on the machine (initdb, pg_ctl and postgres).
//
// The server listens on a Unix socket only (listen_addresses is empty), in a
// socket directory of its own, so several clusters can run side by side on
// one machine with the same port number: the port only names the socket file.
//
// PostgreSQL refuses to run as root. When the calling process runs as root,
// every PostgreSQL binary is started as the "postgres" OS user instead, and
// the data and socket directories are handed to that user. The user must
// already exist; Start fails with a clear error when it does not.
//
// The postgres OS user must also be able to reach the data directory, which
// it cannot under a directory private to root (such as root's home). Locate
// decides where a persistent cluster lives: in its preferred data directory
// when the server can reach it, else in a directory of its own under a
// fallback root such as /var/tmp, named after a hash of the preferred path so
// that every run finds it again, and created with care since such roots are
// writable by everyone.
//
// Start reuses a server that is already running in the data directory (for
// example one left behind by an earlier run that was killed) instead of
// failing; Cluster.Reused reports whether that happened.
//
// Everything the package prints goes through Options.Logf. The server's own
// log goes to the file named by Cluster.LogFile, under DataDir/log.
package pgcluster
