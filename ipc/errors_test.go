package ipc

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCodeOfAndErrorMsg(t *testing.T) {
	pe := perr(CodeLimit, "too big")
	wrapped := fmt.Errorf("serve: %w", pe)
	if CodeOf(wrapped) != CodeLimit || CodeOf(errors.New("x")) != CodeInternal || CodeOf(nil) != 0 {
		t.Fatal("CodeOf")
	}
	m := ErrorMsg(wrapped)
	if m.Code != CodeLimit || m.Message != "serve: ipc: limit: too big" {
		t.Fatalf("ErrorMsg = %+v", m)
	}
	long := ErrorMsg(errors.New(strings.Repeat("é", 2000)))
	if len(long.Message) > maxErrorText || !utf8.ValidString(long.Message) {
		t.Fatalf("long message: %d bytes, valid %v", len(long.Message), utf8.ValidString(long.Message))
	}
	if _, err := Marshal(long); err != nil {
		t.Fatal(err)
	}
	if Code(200).String() != "code(200)" || CodeBusy.String() != "busy" || Type(99).String() != "Type(99)" {
		t.Fatal("String")
	}
}
