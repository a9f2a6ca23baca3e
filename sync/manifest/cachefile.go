package manifest

import (
	"bytes"
	"encoding/json"
)

// cacheFileVersion is the format of a saved HashCache; a file of another
// version is ignored.
const cacheFileVersion = 1

// MaxSavedCache bounds the size of a saved cache worth reading.
const MaxSavedCache = 256 << 20

type savedCache struct {
	Version int           `json:"version"`
	Root    string        `json:"root"`    // the tree's absolute path
	Written int64         `json:"written"` // the clock when saved, ns since the epoch
	Files   []savedFileV1 `json:"files"`
}

type savedFileV1 struct {
	Path  string `json:"p"`
	Size  int64  `json:"s"`
	Mtime int64  `json:"m"`
	Ctime int64  `json:"c"`
	Ino   uint64 `json:"i"`
	Dev   uint64 `json:"d"`
	Mode  uint32 `json:"o"`
	Sum   string `json:"h"`
}

// LoadHashCache decodes the cache Save encoded for the tree at root.
// Missing (nil), corrupt or foreign data (another version,
// another root) gives an empty cache: the walk then hashes everything.
// So does a clock that now reads earlier than when the file was saved,
// since then a file changed since could carry the stat data it had. An
// entry whose modification or change time is not older than the save by
// the racy window is left out (git's racily clean rule).
func LoadHashCache(data []byte, root string) *HashCache {
	c := &HashCache{}
	c.load(data, root)
	return c
}

// load takes what data holds for root. Data it refuses, whole or in
// part, marks the cache changed, so that it is saved again in its place.
func (c *HashCache) load(data []byte, root string) {
	if len(data) == 0 {
		return
	}
	c.changed = true
	if len(data) > MaxSavedCache {
		return
	}
	var sc savedCache
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&sc); err != nil {
		return
	}
	if sc.Version != cacheFileVersion || sc.Root != root || c.clock().UnixNano() < sc.Written {
		return
	}
	limit := sc.Written - int64(racyWindow)
	files := make(map[string]cachedFile, len(sc.Files))
	for _, e := range sc.Files {
		if e.Mtime >= limit || e.Ctime >= limit || !validSum(e.Sum) {
			continue
		}
		files[e.Path] = cachedFile{
			stat: fileStat{size: e.Size, mtime: e.Mtime, ctime: e.Ctime, ino: e.Ino, dev: e.Dev, mode: e.Mode},
			sum:  e.Sum,
		}
	}
	c.mu.Lock()
	c.files = files
	c.changed = len(files) != len(sc.Files)
	c.mu.Unlock()
}

// Save encodes the cache of the tree at root, stamped with the clock's
// time, for LoadHashCache.
func (c *HashCache) Save(root string) ([]byte, error) {
	now := c.clock()
	c.mu.Lock()
	sc := savedCache{Version: cacheFileVersion, Root: root, Written: now.UnixNano(), Files: make([]savedFileV1, 0, len(c.files))}
	for p, f := range c.files {
		sc.Files = append(sc.Files, savedFileV1{
			Path: p, Size: f.stat.size, Mtime: f.stat.mtime, Ctime: f.stat.ctime,
			Ino: f.stat.ino, Dev: f.stat.dev, Mode: f.stat.mode, Sum: f.sum,
		})
	}
	c.mu.Unlock()
	return json.Marshal(&sc)
}
