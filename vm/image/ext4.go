package image

import (
	"context"
	"fmt"
	"os"
)

// mkfsArgs is mkfs.ext4's command line that makes file a root disk of the
// tree dir, without mounting anything (-d copies the tree in). Inode
// tables and journal are left as holes (the guest mounts with
// noinit_itable), so the image stays sparse.
func mkfsArgs(dir, file string) []string {
	return []string{"-q", "-F", "-t", "ext4", "-L", "airlock-root", "-m", "0", "-d", dir,
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", file}
}

func makeRootfs(ctx context.Context, mkfs, dir, file string, size int64) error {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if out, err := runCommand(ctx, "", mkfs, mkfsArgs(dir, file)...); err != nil {
		return fmt.Errorf("mkfs.ext4 -d: %w%s", err, outputTail(out))
	}
	return nil
}
