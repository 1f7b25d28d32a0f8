package ipc

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Code is the u16 error code carried by an Error message and by a
// *ProtocolError. Values are stable; docs/protocol.md lists them.
type Code uint16

// Error codes. 0 is never sent.
const (
	CodeBadFrame           Code = 1  // frame header invalid: length, flags, truncated frame, unexpected fds
	CodeBadMessage         Code = 2  // unknown type, malformed payload, bad bool/UTF-8/value, trailing bytes
	CodeUnsupportedVersion Code = 3  // bad magic or protocol version not spoken by the peer
	CodeOutOfOrder         Code = 4  // message not allowed in the connection's state
	CodeBadRequest         Code = 5  // well-formed request the daemon cannot honour (bad rank, split, device...)
	CodeLimit              Code = 6  // a frame, string, list or value over a configured limit
	CodeDenied             Code = 7  // peer credentials not allowed
	CodeInternal           Code = 8  // a fault inside the sender
	CodeShuttingDown       Code = 9  // the daemon is stopping
	CodeNotFound           Code = 10 // unknown job, split or dataset
	CodeBusy               Code = 11 // resources exhausted (too many trainers, no memory for slots)
)

var codeNames = map[Code]string{
	CodeBadFrame:           "bad_frame",
	CodeBadMessage:         "bad_message",
	CodeUnsupportedVersion: "unsupported_version",
	CodeOutOfOrder:         "out_of_order",
	CodeBadRequest:         "bad_request",
	CodeLimit:              "limit",
	CodeDenied:             "denied",
	CodeInternal:           "internal",
	CodeShuttingDown:       "shutting_down",
	CodeNotFound:           "not_found",
	CodeBusy:               "busy",
}

// String returns the code's wire name ("bad_frame"), or "code(N)" for an
// unknown value.
func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("code(%d)", uint16(c))
}

// ProtocolError is a violation of the protocol detected locally (by the
// codec, the Conn or the State). Code says which Error message to send back
// before closing the connection. Err, if set, is the underlying cause.
type ProtocolError struct {
	Code Code
	Msg  string
	Err  error
}

func (e *ProtocolError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("ipc: %s: %s: %v", e.Code, e.Msg, e.Err)
	}
	return fmt.Sprintf("ipc: %s: %s", e.Code, e.Msg)
}

func (e *ProtocolError) Unwrap() error { return e.Err }

func perr(code Code, format string, args ...any) *ProtocolError {
	return &ProtocolError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// CodeOf returns the Code of the first *ProtocolError in err's chain, and
// CodeInternal for any other non-nil error (0 for nil). serve uses it to
// pick the Error message it sends before closing.
func CodeOf(err error) Code {
	if err == nil {
		return 0
	}
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return CodeInternal
}

// AsError turns an Error message received from the peer into a
// *ProtocolError carrying the peer's code, for callers that surface it.
func (m *Error) AsError() error {
	return &ProtocolError{Code: m.Code, Msg: "peer: " + m.Message}
}

// maxErrorText bounds the message of an Error built by ErrorMsg, well under
// any receiver's MaxString.
const maxErrorText = 1024

// ErrorMsg builds the Error message that answers err: its Code (CodeOf) and
// its text, cut to at most 1024 bytes at a UTF-8 boundary. The usual end of
// a failed connection is conn.WriteMsg(ipc.ErrorMsg(err)) then conn.Close().
func ErrorMsg(err error) *Error {
	text := err.Error()
	if len(text) > maxErrorText {
		text = text[:maxErrorText]
		for len(text) > 0 && !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
	}
	return &Error{Code: CodeOf(err), Message: strings.ToValidUTF8(text, "?")}
}
