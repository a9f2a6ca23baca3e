//go:build !linux

package objects

// syncfsWorks is false where there is no syncfs: each temporary file is
// fsynced as it is written.
const syncfsWorks = false

// syncTemps has nothing left to do: each file was fsynced.
func (s *Store) syncTemps([]temp) error { return nil }

// syncCommitted fsyncs each directory that received an object.
func (s *Store) syncCommitted(dirs map[string]bool) error {
	for d := range dirs {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}
