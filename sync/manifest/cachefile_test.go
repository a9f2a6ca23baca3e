package manifest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func plainWalk(t *testing.T, dir string) *Manifest {
	t.Helper()
	m, _, err := Walk(context.Background(), dir, WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// loadAt loads the cache at path with the clock reading now.
func loadAt(path, root string, now func() time.Time) *HashCache {
	data, _ := os.ReadFile(path)
	c := &HashCache{now: now}
	c.load(data, root)
	return c
}

// save writes c's encoding for root to path, as app/pipeline does.
func save(c *HashCache, path, root string) error {
	data, err := c.Save(root)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func later() time.Time { return time.Now().Add(time.Hour) }

func TestSavedHashCacheRoundTrip(t *testing.T) {
	skipWithoutStatData(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n", "src/b.go": "package b\n"})
	path := filepath.Join(t.TempDir(), "stat")
	c := &HashCache{now: later}
	walkCached(t, dir, c)
	if err := save(c, path, dir); err != nil {
		t.Fatal(err)
	}
	c2 := loadAt(path, dir, func() time.Time { return later().Add(time.Second) })
	if c2.Len() != 2 {
		t.Fatalf("loaded cache remembers %d files, want 2", c2.Len())
	}
	// A walk of the unchanged tree leaves the loaded cache as it was, so
	// it need not be saved again; an edit changes it.
	if walkCached(t, dir, c2); c2.Changed() {
		t.Error("Changed() after a walk of the unchanged tree")
	}
	writeTree(t, dir, map[string]string{"a.txt": "edited\n"})
	if walkCached(t, dir, c2); !c2.Changed() {
		t.Error("Changed() = false after a walk that saw an edit")
	}
	// A cache for another project's path is not used.
	if c3 := loadAt(path, dir+"-other", later); c3.Len() != 0 {
		t.Errorf("cache of %s used for another path: %d files", dir, c3.Len())
	}
}

func TestSavedHashCacheRacyFileHashedAgain(t *testing.T) {
	skipWithoutStatData(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "aaaa\n"})
	path := filepath.Join(t.TempDir(), "stat")
	c := &HashCache{} // the real clock: a.txt was written just now
	walkCached(t, dir, c)
	save(c, path, dir)
	fi, _ := os.Stat(filepath.Join(dir, "a.txt"))
	// Same size, same mtime, new content.
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("bbbb\n"), 0o644)
	os.Chtimes(filepath.Join(dir, "a.txt"), fi.ModTime(), fi.ModTime())
	c2 := loadAt(path, dir, time.Now)
	m, _ := walkCached(t, dir, c2)
	if d := cmp.Diff(plainWalk(t, dir), m); d != "" {
		t.Fatalf("racily clean file not hashed again (-want +got):\n%s", d)
	}
}

func TestSavedHashCacheClockBackwards(t *testing.T) {
	skipWithoutStatData(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	path := filepath.Join(t.TempDir(), "stat")
	c := &HashCache{now: later}
	walkCached(t, dir, c)
	save(c, path, dir)
	// The clock now reads before the save: nothing is trusted.
	if c2 := loadAt(path, dir, func() time.Time { return later().Add(-time.Minute) }); c2.Len() != 0 {
		t.Errorf("cache trusted after the clock went back: %d files", c2.Len())
	}
}

func TestSavedHashCacheCoarseTimestamps(t *testing.T) {
	skipWithoutStatData(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "aaaa\n"})
	p := filepath.Join(dir, "a.txt")
	whole := time.Now().Add(-time.Hour).Truncate(2 * time.Second)
	os.Chtimes(p, whole, whole)
	path := filepath.Join(t.TempDir(), "stat")
	// The walk and the save happen within the same two-second tick as
	// the file's (truncated) mtime.
	clock := func() time.Time { return whole.Add(1500 * time.Millisecond) }
	c := &HashCache{now: clock}
	walkCached(t, dir, c)
	save(c, path, dir)
	// Rewritten in the same tick: same size, same truncated mtime.
	os.WriteFile(p, []byte("bbbb\n"), 0o644)
	os.Chtimes(p, whole, whole)
	c2 := loadAt(path, dir, func() time.Time { return whole.Add(3 * time.Second) })
	m, _ := walkCached(t, dir, c2)
	if d := cmp.Diff(plainWalk(t, dir), m); d != "" {
		t.Fatalf("coarse-timestamp rewrite not seen (-want +got):\n%s", d)
	}
}

func TestSavedHashCacheBadFileIgnored(t *testing.T) {
	skipWithoutStatData(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	path := filepath.Join(t.TempDir(), "stat")
	c := &HashCache{now: later}
	walkCached(t, dir, c)
	save(c, path, dir)
	good, _ := os.ReadFile(path)
	version := slices.Clone(good)
	version[len(cacheFileMagic)] = cacheFileVersion + 1
	for name, data := range map[string][]byte{
		"garbage":         []byte("\x00\xffnot a cache"),
		"truncated":       good[:len(good)/2],
		"one short":       good[:len(good)-1],
		"trailing":        append(slices.Clone(good), 0),
		"version":         version,
		"json, version 1": []byte(`{"version":1,"root":` + strconv.Quote(dir) + `,"written":1,"files":[]}`),
		"other root":      bytes.Replace(good, []byte(dir), []byte(dir[:len(dir)-1]+"X"), 1),
	} {
		os.WriteFile(path, data, 0o600)
		c := loadAt(path, dir, later)
		if c.Len() != 0 {
			t.Errorf("%s: cache file used (%d files)", name, c.Len())
		}
		m, _ := walkCached(t, dir, c)
		if d := cmp.Diff(plainWalk(t, dir), m); d != "" {
			t.Errorf("%s: walk differs (-want +got):\n%s", name, d)
		}
		if err := save(c, path, dir); err != nil {
			t.Fatalf("%s: rewriting the cache: %v", name, err)
		}
		if c := loadAt(path, dir, func() time.Time { return later().Add(time.Second) }); c.Len() != 2 {
			t.Errorf("%s: rewritten cache remembers %d files, want 2", name, c.Len())
		}
	}
}

func TestSavedHashCacheModeChangeSeen(t *testing.T) {
	skipWithoutStatData(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"run.sh": "echo\n"})
	c := &HashCache{now: later}
	walkCached(t, dir, c)
	// Poison the remembered hash: if the cache were used after the mode
	// change, the walk would report it.
	for p, f := range c.files {
		f.sum = strings.Repeat("0", 64)
		c.files[p] = f
	}
	os.Chmod(filepath.Join(dir, "run.sh"), 0o755)
	m, _ := walkCached(t, dir, c)
	if d := cmp.Diff(plainWalk(t, dir), m); d != "" {
		t.Fatalf("mode change not seen (-want +got):\n%s", d)
	}
}

// TestSavedHashCacheMatchesPlainWalk is a property test: after random
// edits, a walk with the saved and reloaded cache equals a plain walk.
func TestSavedHashCacheMatchesPlainWalk(t *testing.T) {
	skipWithoutStatData(t)
	dir := t.TempDir()
	path := filepath.Join(t.TempDir(), "stat")
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "d/c", "d/e", "d/f/g", "h"}
	files := map[string]string{}
	for _, n := range names {
		files[n] = "x"
	}
	writeTree(t, dir, files)
	clock := later()
	for round := range 40 {
		clock = clock.Add(time.Minute)
		now := func() time.Time { return clock }
		c := loadAt(path, dir, now)
		m, _ := walkCached(t, dir, c)
		if d := cmp.Diff(plainWalk(t, dir), m); d != "" {
			t.Fatalf("round %d: cached walk differs (-want +got):\n%s", round, d)
		}
		if err := save(c, path, dir); err != nil {
			t.Fatal(err)
		}
		for range 1 + rng.IntN(3) {
			p := filepath.Join(dir, names[rng.IntN(len(names))])
			switch rng.IntN(4) {
			case 0: // same size, new content, old mtime back
				fi, err := os.Stat(p)
				os.WriteFile(p, []byte(fmt.Sprint(rng.IntN(10))), 0o644)
				if err == nil {
					os.Chtimes(p, fi.ModTime(), fi.ModTime())
				}
			case 1:
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, []byte(strings.Repeat("y", rng.IntN(5))), 0o644)
			case 2:
				os.Remove(p)
			case 3:
				os.Chmod(p, os.FileMode(0o600|rng.IntN(2)*0o100))
			}
		}
	}
}

// FuzzLoadHashCache: no saved cache, however damaged, makes the load
// panic; what it keeps saves and loads back the same.
func FuzzLoadHashCache(f *testing.F) {
	c := &HashCache{now: func() time.Time { return time.Unix(1000, 0) }}
	c.files = map[string]cachedFile{"a/b.go": {stat: fileStat{size: 3, mtime: 1, ctime: 2, ino: 4, dev: 5, mode: 0o100644}, sum: strings.Repeat("ab", 32)}}
	good, err := c.Save("/p")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-5])
	f.Add([]byte(cacheFileMagic + "\x02\x02/p\x00\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		now := func() time.Time { return time.Unix(2000, 0) }
		c := &HashCache{now: now}
		c.load(data, "/p")
		again, err := c.Save("/p")
		if err != nil {
			t.Fatal(err)
		}
		back := &HashCache{now: now}
		back.load(again, "/p")
		if back.Len() != c.Len() {
			t.Fatalf("saved %d files, loaded back %d", c.Len(), back.Len())
		}
	})
}
