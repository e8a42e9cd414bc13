// Package readbody reads a whole HTTP body into a caller's buffer, bounded, with room that
// follows the bytes as they arrive rather than the length a sender announced: the HTTP edge
// reads request bodies with it, the exchange upstream answers.
package readbody
