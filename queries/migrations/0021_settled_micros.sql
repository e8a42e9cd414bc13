-- What a key reservation's settlement added to its budget's spend (NULL for a reservation
-- settled before this migration, or not settled yet). A stream billed from its checkpoint after
-- its process was lost settles its key reservation at the checkpoint's cost; when the stream's
-- own record arrives later (from the lost process's spill file, or from a process that was cut
-- off from the database for longer than a lease) the rest of its usage is billed, and the key's
-- spend is raised to what the request's records charge together, once: by what that total
-- exceeds settled_micros.
ALTER TABLE key_reservations ADD COLUMN settled_micros bigint;
