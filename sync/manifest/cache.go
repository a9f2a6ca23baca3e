package manifest

import (
	"maps"
	"sync"
	"time"
)

// racyWindow is how recent a file's modification or change time may be
// for its hash to be remembered: a file written within the file system's
// timestamp granularity of the walk could change again without its stat
// data changing (git's "racily clean" entries). Two seconds covers the
// coarsest common granularity (FAT).
const racyWindow = 2 * time.Second

// HashCache remembers the SHA-256 of the files of one tree by their stat
// data (size, modification and change times, inode, device, mode), so that a
// later Walk of the same tree with the same cache reads only the files
// whose stat data changed, as git's index does. A file changed within
// two seconds of the walk that recorded it is not remembered: it is
// hashed again next time. Files Walk did not see are forgotten.
//
// On systems without that stat data (anything but Linux and macOS) the
// cache is never used. The zero value is an empty cache; a HashCache must
// not be copied after first use, and is used by one Walk at a time.
type HashCache struct {
	mu    sync.Mutex
	files map[string]cachedFile
	// changed says a walk made the cache remember or forget something
	// since it was made or loaded: only then is it worth saving again.
	changed bool
	// now is the clock, for tests.
	now func() time.Time
}

// Changed says whether a walk changed what the cache remembers since it
// was made or loaded (LoadHashCache): a cache that did not change need
// not be saved again, since loading the old save gives the same cache.
func (c *HashCache) Changed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// fileStat is what identifies a file's content without reading it.
type fileStat struct {
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
	ino, dev     uint64
	mode         uint32 // type and permission bits
}

type cachedFile struct {
	stat fileStat
	sum  string
}

// Len returns how many files the cache remembers.
func (c *HashCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.files)
}

func (c *HashCache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// lookup returns the remembered hash of the file at path if its stat
// data is unchanged.
func (c *HashCache) lookup(path string, st fileStat) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.files[path]
	if !ok || f.stat != st {
		return "", false
	}
	return f.sum, true
}

// replace makes files, recorded by a walk that started at start, the
// cache's content, leaving out the racily clean ones.
func (c *HashCache) replace(files map[string]cachedFile, start time.Time) {
	limit := start.Add(-racyWindow).UnixNano()
	for p, f := range files {
		if f.stat.mtime >= limit || f.stat.ctime >= limit {
			delete(files, p)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !maps.Equal(c.files, files) {
		c.changed = true
	}
	c.files = files
}

// update forgets the files at gone and remembers files, recorded by a
// walk of part of the tree that started at start, leaving out the
// racily clean ones; what else the cache holds stays.
func (c *HashCache) update(gone []string, files map[string]cachedFile, start time.Time) {
	limit := start.Add(-racyWindow).UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil {
		c.files = make(map[string]cachedFile, len(files))
	}
	for _, p := range gone {
		if _, ok := c.files[p]; ok {
			delete(c.files, p)
			c.changed = true
		}
	}
	for p, f := range files {
		if f.stat.mtime < limit && f.stat.ctime < limit {
			if old, ok := c.files[p]; !ok || old != f {
				c.files[p] = f
				c.changed = true
			}
		}
	}
}
