//go:build !linux

package hostile

import "errors"

func listenNoRoom(string) (int, error) { return -1, errors.ErrUnsupported }

func closeFD(int) {}
