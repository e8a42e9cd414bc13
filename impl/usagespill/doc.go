// Package usagespill owns the usage spill file: the local, append-only file in which a gateway
// process keeps the usage records its database does not take (during an outage), in the order
// they were settled, until the database has them, so that neither a long outage nor a restart
// during one loses usage. It knows the file and its format; when to spill, to replay and to
// empty the file is the business of the meter (impl/billing).
//
// # Format
//
// The file starts with the line "tollgate usage spill 1\n". Each record follows as a frame: its
// payload's length (4 bytes, little-endian), a CRC-32C (Castagnoli) of the length bytes and the
// payload (4 bytes, little-endian), then the payload, one usage record and the name of the
// process that settled it as a JSON object. A payload is at most 1 MiB.
//
// Append writes a group of records with one write and makes it durable with one fsync before
// it returns: a record is in the file, whole, once Append has said so. A crash in the middle of
// a write can leave a torn last frame (a short frame, or one whose checksum does not match):
// Open keeps every whole frame before it, copies the bytes from the first bad frame on to a
// file beside the spill (<name>.torn-<unix nanoseconds>) for inspection, truncates the spill
// after the last whole frame, and reports what it found (Report). A frame is never half
// trusted. A bad frame followed by whole ones is damage (a flipped bit, a bad sector), not a
// torn write: Open finds the next whole frame (an offset where a frame's checksum, which
// covers its length, holds and its payload decodes), saves the damaged bytes beside the spill
// (<name>.damaged-<unix nanoseconds>), moves the whole frames after them down over them and
// reports the damage, so that one damaged record does not take the records after it along.
// Looking for the next whole frame checksums at most 64 MiB in all (a real damaged region is
// one frame, and a payload is a JSON object, so few offsets are checksummed at all): a file
// crafted with a plausible frame head at every few offsets would otherwise cost hours. Past
// that bound, the rest of the file is set aside as a torn tail and the report says so.
//
// A checksum finds damage, not forgery: whether a record read back is one to apply is the
// meter's call (impl/billing), and Quarantine keeps one it does not apply, or one the database
// refused as data, in a file beside the spill (<name>.quarantine, 0600), once: a record the file holds already (a process that
// quarantined it died before Reset, and the next one read it again) is not written twice.
// ReadSetAside reads the records of the files set aside (a quarantine file, or the whole
// frames of a torn or damaged one, found as Open finds them), for an operator to bill them
// once they are seen to be genuine (tollgate admin usage import-spill).
// Open makes the spill file 0600, and OpenDir its directory 0700, whatever they were before.
//
// # Size and emptying
//
// The file never grows beyond Options.MaxBytes (default DefaultMaxBytes, 256 MiB, some 550,000
// records): Append takes the records that fit and refuses the rest with ErrFull. Records are
// never removed one by one; once every record in the file has been written to the database,
// Reset truncates the file to its header line.
//
// # One process per file
//
// A process holds its spill file under an exclusive lock (flock) from Open to Close, and Open
// fails with ErrInUse on a file that another live process holds. The kernel drops the lock when
// a process dies, however it dies. OpenDir lets several processes share a directory: each takes
// a file no live process holds, preferring one that still has records, and moves into it the
// records of every other file no live process holds, so the records of the processes that are
// gone are written by the next one that starts, however many there were.
package usagespill
