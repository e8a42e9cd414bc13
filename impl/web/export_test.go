package web

// SessionToken is sessionToken, for the tests that end a session they found in the database.
var SessionToken = sessionToken

// SealedIDsSecret is the server secret the console seals ids with.
const SealedIDsSecret = sealedIDsSecret
