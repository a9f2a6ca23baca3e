package objects

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncfsWorks says the temporary files of a batch need no fsync each:
// syncTemps flushes the store's whole file system at once.
const syncfsWorks = true

// syncTemps makes the batch's temporary files durable: one syncfs of the
// store's file system.
func (s *Store) syncTemps([]temp) error { return s.syncfs() }

// syncCommitted makes the renames into dirs durable: one syncfs again.
func (s *Store) syncCommitted(map[string]bool) error { return s.syncfs() }

func (s *Store) syncfs() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", s.dir, err)
	}
	return nil
}
