package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/vm/disk"
	"github.com/airlock-dev/airlock/vm/ext4"
)

// CacheDir is where a sandbox's dependency caches are mounted in the
// guest: its copy of the project's cache disk.
const CacheDir = "/var/cache/airlock"

// CacheFile is a sandbox's copy of its project's cache disk, while the
// run lasts.
const CacheFile = "cache.img"

// CacheSize is a project's cache disk's size (sparse: the host pays for
// what is written).
const CacheSize = 32 << 30

// JailWrite are the directories the sandbox's command and its verify may
// write below, besides their home and /tmp: they run in the guest
// agent's jail (guest.RequestJail; docs/architecture.md says what it
// denies).
var JailWrite = []string{sandbox.Workspace, CacheDir}

// CacheEnv points the common toolchains' caches into CacheDir: Go's module
// and build caches, npm, pip, cargo's registry, Maven's and Gradle's
// repositories, and anything that follows XDG_CACHE_HOME.
func CacheEnv() map[string]string {
	return map[string]string{
		"GOMODCACHE":       CacheDir + "/go/mod",
		"GOCACHE":          CacheDir + "/go/build",
		"npm_config_cache": CacheDir + "/npm",
		"PIP_CACHE_DIR":    CacheDir + "/pip",
		"CARGO_HOME":       CacheDir + "/cargo",
		"GRADLE_USER_HOME": CacheDir + "/gradle",
		"MAVEN_OPTS":       "-Dmaven.repo.local=" + CacheDir + "/m2",
		"XDG_CACHE_HOME":   CacheDir + "/xdg",
	}
}

// WithCacheEnv is env with CacheEnv under it: what the run sets wins.
func WithCacheEnv(env map[string]string) map[string]string {
	out := CacheEnv()
	maps.Copy(out, env)
	return out
}

// cacheDisk gives the sandbox a copy of the project's cache disk (made
// empty the first time), to be mounted on CacheDir.
func (r *runner) cacheDisk(ctx context.Context) (launch.Disk, error) {
	base := r.o.Cache
	if err := os.MkdirAll(filepath.Dir(base), 0o700); err != nil {
		return launch.Disk{}, err
	}
	if _, err := os.Stat(base); errors.Is(err, fs.ErrNotExist) {
		if err := newCacheDisk(base); err != nil {
			return launch.Disk{}, err
		}
	}
	clone := r.sb.Path(CacheFile)
	os.Remove(clone)
	if r.o.FreshCache {
		if err := ext4.Format(clone, CacheSize, "airlock-cache"); err != nil {
			return launch.Disk{}, fmt.Errorf("a fresh cache disk: %w", err)
		}
	} else {
		if _, err := disk.Keep(ctx, base, clone); err != nil {
			return launch.Disk{}, fmt.Errorf("the project's cache disk: %w", err)
		}
		if from := cacheFrom(base); from != "" {
			_ = r.sb.Audit(sandbox.Event{Event: EventCacheUsed, Data: map[string]any{"from": from}})
		}
	}
	r.cache = clone
	return launch.Disk{Path: clone, Mount: CacheDir}, nil
}

// newCacheDisk makes base an empty cache disk unless another run (a
// fan-out's) made it meanwhile: each formats its own file and links it
// into place only where nothing is.
func newCacheDisk(base string) error {
	f, err := os.CreateTemp(filepath.Dir(base), filepath.Base(base)+".new-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	os.Remove(tmp) // ext4.Format makes the file itself
	defer os.Remove(tmp)
	if err := ext4.Format(tmp, CacheSize, "airlock-cache"); err != nil {
		return err
	}
	if err := os.Link(tmp, base); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("the project's cache disk: %w", err)
	}
	return nil
}

// giveCache makes the cache directories the command's user's.
func (r *runner) giveCache(ctx context.Context, m Machine) error {
	if r.cache == "" {
		return nil
	}
	dirs := []string{CacheDir}
	for _, v := range CacheEnv() {
		if d, ok := strings.CutPrefix(v, "-Dmaven.repo.local="); ok {
			v = d
		}
		dirs = append(dirs, v)
	}
	script := "mkdir -p " + strings.Join(dirs, " ")
	if r.user != "" {
		if !userName.MatchString(r.user) {
			return fmt.Errorf("user %q: not a valid account name", r.user)
		}
		script += " && chown -R -h " + r.user + ": " + CacheDir
	}
	var stderr bytes.Buffer
	if err := m.Exec(ctx, script, nil, nil, &stderr); err != nil {
		return fmt.Errorf("prepare the caches in the VM: %w (%s)", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// keepCache makes the sandbox's cache disk the project's next one when
// the run earned it (its verify passed, or with no verify its command
// exited 0), once the machine is off; otherwise it is dropped. A kept
// machine keeps its copy.
func (r *runner) keepCache(promote bool) {
	if r.cache == "" || r.kept {
		return
	}
	if promote {
		if err := os.Rename(r.cache, r.o.Cache); err == nil {
			_ = atomicfile.WriteFile(r.o.Cache+cacheFromSuffix, []byte(r.sb.ID+"\n"), 0o600)
			_ = r.sb.Audit(sandbox.Event{Event: EventCacheKept, Data: map[string]any{"cache": r.o.Cache}})
			return
		}
	}
	os.Remove(r.cache)
}

// cacheFromSuffix names the file beside a project's cache disk that says
// which sandbox's run left it.
const cacheFromSuffix = ".from"

// cacheFrom is the sandbox whose run left the cache disk at path, "" when
// none is recorded (a disk made empty, or kept before the record) or the
// disk is gone (its record outlived it: the next disk starts empty).
func cacheFrom(path string) string {
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	b, err := os.ReadFile(path + cacheFromSuffix)
	if err != nil || len(b) > 128 {
		return ""
	}
	id := strings.TrimSpace(string(b))
	if !sandbox.ValidID(id) {
		return ""
	}
	return id
}

// EventCacheKept: the sandbox's caches became its project's.
const EventCacheKept sandbox.EventKind = "cache-kept"

// EventCacheUsed: the run started with the project's caches, kept by the
// sandbox in "from".
const EventCacheUsed sandbox.EventKind = "cache-used"
