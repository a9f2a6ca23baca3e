//go:build !unix

package review

import (
	"fmt"
	"os"
)

// syncBatch fsyncs every file and directory, a few at a time.
func syncBatch(files []string, dirs map[string]bool) error {
	if err := syncFiles(files, false, (*os.File).Sync); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	var ds []string
	for d := range dirs {
		ds = append(ds, d)
	}
	if err := syncFiles(ds, true, (*os.File).Sync); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return nil
}
