package agent

import (
	"path"
	"strings"

	"github.com/airlock-dev/airlock/guest"
)

// shareMount is a virtio-fs share PID 1 mounts: guest.VirtiofsArg=Tag:Dir.
type shareMount struct {
	Tag, Dir string
}

// shareMounts reads the guest.VirtiofsArg arguments of a kernel command
// line. An argument with an empty tag, a tag longer than virtio-fs
// carries, or a directory that is not absolute and clean is returned in
// bad, for the log.
func shareMounts(cmdline string) (mounts []shareMount, bad []string) {
	for _, f := range strings.Fields(cmdline) {
		v, ok := strings.CutPrefix(f, guest.VirtiofsArg+"=")
		if !ok {
			continue
		}
		tag, dir, ok := strings.Cut(v, ":")
		if !ok || tag == "" || len(tag) > 35 || dir == "" || !path.IsAbs(dir) || path.Clean(dir) != dir || dir == "/" {
			bad = append(bad, f)
			continue
		}
		mounts = append(mounts, shareMount{Tag: tag, Dir: dir})
	}
	return mounts, bad
}
