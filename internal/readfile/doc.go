// Package readfile reads files from outside the process with a bound: only
// regular files (a FIFO, a device such as /dev/zero, a socket or a
// directory is refused without being read, so it cannot hang a reader or
// make it grow without end) and at most a given number of bytes.
package readfile
