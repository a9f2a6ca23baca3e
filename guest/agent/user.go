package agent

import (
	"fmt"
	"os/user"
	"strconv"
	"syscall"
)

// account is a user of the guest that a session's command runs as.
type account struct {
	name     string
	uid, gid uint32
	groups   []uint32
	home     string
}

// lookupAccount reads name from the guest's /etc/passwd and /etc/group
// (os/user's pure-Go lookup: the agent is built without cgo).
func lookupAccount(name string) (*account, error) {
	if name == "" {
		return nil, fmt.Errorf("empty user name")
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("run as %s: %w", name, err)
	}
	a := &account{name: u.Username, home: u.HomeDir}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("run as %s: uid %q or gid %q is not a number", name, u.Uid, u.Gid)
	}
	a.uid, a.gid = uint32(uid), uint32(gid)
	gids, err := u.GroupIds()
	if err != nil {
		gids = []string{u.Gid} // no /etc/group: the primary group alone
	}
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			a.groups = append(a.groups, uint32(n))
		}
	}
	return a, nil
}

func (a *account) credential() *syscall.Credential {
	return &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: a.groups}
}
