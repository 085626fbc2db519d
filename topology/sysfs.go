package topology

import (
	"errors"
	"io/fs"
	"os"
)

// DiscoverFS reads the machine from a Linux system tree: fsys is rooted
// where "/" would be, so it holds sys/devices/system/... (and optionally
// proc/). (Placeholder: being implemented.)
func DiscoverFS(fsys fs.FS) (*Machine, error) {
	return nil, errors.New("topology: discovery not implemented yet")
}

// Discover reads the machine from the Linux system tree rooted at root ("/"
// for this machine).
func Discover(root string) (*Machine, error) { return DiscoverFS(os.DirFS(root)) }
