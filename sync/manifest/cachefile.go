package manifest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
)

// cacheFileVersion is the format of a saved HashCache; a file of another
// version is ignored. Version 1 was JSON, whose decoding took 75 ms of
// every snapshot of Go's sources (12k files); version 2 is binary:
//
//	cacheFileMagic, uvarint version, string root, varint written (the
//	clock when saved, ns since the epoch), uvarint count, then count
//	files: string path, varint size, mtime, ctime, uvarint ino, dev,
//	mode, and the 32 bytes of the SHA-256
//
// where a string is a uvarint length and its bytes.
const cacheFileVersion = 2

// cacheFileMagic opens a saved HashCache.
const cacheFileMagic = "airlock stat cache\n"

// MaxSavedCache bounds the size of a saved cache worth reading.
const MaxSavedCache = 256 << 20

// minSavedFile is the fewest bytes a saved file takes: an empty path,
// one byte per number and the hash.
const minSavedFile = 1 + 6 + sha256.Size

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
	r := cacheReader{b: data}
	if string(r.bytes(len(cacheFileMagic))) != cacheFileMagic || r.uvarint() != cacheFileVersion ||
		string(r.str()) != root {
		return
	}
	written := r.varint()
	n := r.uvarint()
	if r.bad || c.clock().UnixNano() < written || n > uint64(len(r.b)/minSavedFile) {
		return
	}
	limit := written - int64(racyWindow)
	files := make(map[string]cachedFile, n)
	for range n {
		p := r.str()
		st := fileStat{size: r.varint(), mtime: r.varint(), ctime: r.varint()}
		st.ino, st.dev = r.uvarint(), r.uvarint()
		mode := r.uvarint()
		sum := r.bytes(sha256.Size)
		if r.bad || mode > math.MaxUint32 {
			return
		}
		st.mode = uint32(mode)
		if st.mtime >= limit || st.ctime >= limit {
			continue
		}
		files[string(p)] = cachedFile{stat: st, sum: hex.EncodeToString(sum)}
	}
	if len(r.b) != 0 {
		return
	}
	c.mu.Lock()
	c.files = files
	c.changed = uint64(len(files)) != n
	c.mu.Unlock()
}

// Save encodes the cache of the tree at root, stamped with the clock's
// time, for LoadHashCache.
func (c *HashCache) Save(root string) ([]byte, error) {
	now := c.clock()
	c.mu.Lock()
	defer c.mu.Unlock()
	b := make([]byte, 0, 64+len(root)+len(c.files)*(minSavedFile+64))
	b = append(b, cacheFileMagic...)
	b = binary.AppendUvarint(b, cacheFileVersion)
	b = appendString(b, root)
	b = binary.AppendVarint(b, now.UnixNano())
	b = binary.AppendUvarint(b, uint64(len(c.files)))
	for p, f := range c.files {
		sum, err := hex.DecodeString(f.sum)
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("stat cache: %s: SHA-256 %q is not 64 hex digits", p, f.sum)
		}
		b = appendString(b, p)
		b = binary.AppendVarint(b, f.stat.size)
		b = binary.AppendVarint(b, f.stat.mtime)
		b = binary.AppendVarint(b, f.stat.ctime)
		b = binary.AppendUvarint(b, f.stat.ino)
		b = binary.AppendUvarint(b, f.stat.dev)
		b = binary.AppendUvarint(b, uint64(f.stat.mode))
		b = append(b, sum...)
	}
	return b, nil
}

// cacheReader reads a saved cache; past its first error (bad) every
// read gives zero.
type cacheReader struct {
	b   []byte
	bad bool
}

func (r *cacheReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *cacheReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *cacheReader) bytes(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.bad, r.b = true, nil
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *cacheReader) str() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad, r.b = true, nil
		return nil
	}
	return r.bytes(int(n))
}
