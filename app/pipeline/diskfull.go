package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/internal/headtail"
)

// diskFullLeft is the free space under which the sandbox's disk counts as
// full: ext4 keeps a little back for its own metadata, and a file that
// failed with ENOSPC leaves the last blocks unwritten.
const diskFullLeft = 16 << 20

// checkDisk asks the guest, after a command that failed or ran
// containers, how full the file systems holding /workspace (the
// sandbox's disk: its quota) and, with Docker, /var/lib/docker (Docker's
// images and containers: the same disk on an overlay root, else the
// image's root disk) are, and when one is
// full says so: in the sandbox's metadata, shown by run and status, and
// in the audit log. A guest that does not answer, or answers out of
// shape, is not full: the check is information, never a failure of the
// run.
func (r *runner) checkDisk(ctx context.Context, m Machine, code int) error {
	if code == 0 && !r.o.Docker {
		return nil
	}
	dirs := []string{sandbox.Workspace}
	if r.o.Docker {
		dirs = append(dirs, guest.DockerDataDir)
	}
	var stdout, stderr headtail.Head
	stdout.Max, stderr.Max = 4<<10, 1<<10
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.Exec(ctx, "df -kP "+strings.Join(dirs, " "), nil, &stdout, &stderr); err != nil && stdout.String() == "" {
		return nil
	}
	uses, ok := parseDF(stdout.String(), dirs)
	if !ok {
		return nil
	}
	for _, use := range uses {
		if use.Size-use.Used > diskFullLeft {
			continue
		}
		if _, err := r.sb.Update(func(mt *sandbox.Meta) { mt.DiskFull = &use }); err != nil {
			return err
		}
		return r.sb.Audit(sandbox.Event{Event: sandbox.EventDiskFull, Data: map[string]any{"path": use.Path, "size": use.Size, "used": use.Used}})
	}
	return nil
}

// parseDF reads `df -kP DIR...`'s lines of figures, one per directory
// asked, in order (POSIX: 1024-byte blocks; total, used, available):
// sizes from a kilobyte to an exabyte, used no more than the total.
func parseDF(out string, dirs []string) ([]sandbox.DiskUsage, bool) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(dirs)+1 || !strings.HasPrefix(lines[0], "Filesystem") {
		return nil, false
	}
	var uses []sandbox.DiskUsage
	for i, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 6 {
			return nil, false
		}
		size, err1 := strconv.ParseInt(f[1], 10, 64)
		used, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || size < 1 || size > 1<<50 || used < 0 || used > size {
			return nil, false
		}
		uses = append(uses, sandbox.DiskUsage{Path: dirs[i], Size: size << 10, Used: used << 10})
	}
	return uses, true
}

// DiskFullMessage is what a user reads about a full disk.
func DiskFullMessage(u sandbox.DiskUsage) string {
	what, more := "the sandbox's disk ("+sandbox.Workspace+")", "give it more with --disk SIZE or [limits] disk"
	if u.Path == guest.DockerDataDir {
		what, more = "the disk holding Docker's images and containers ("+guest.DockerDataDir+")", "remove images or containers the command no longer needs (docker system prune), or give the sandbox more with --disk SIZE"
	}
	return fmt.Sprintf("%s was full when the command ended (%.1f of %.1f GiB used): what it wrote past that failed in the VM (No space left on device); %s",
		what, float64(u.Used)/(1<<30), float64(u.Size)/(1<<30), more)
}
