package ipc

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	docMsgRow     = regexp.MustCompile(`^\| (\d+) \| (\w+) \| (client|daemon|either) \| (.+) \|$`)
	docSection    = regexp.MustCompile(`^### (\d+) (\w+) \(`)
	docFieldRow   = regexp.MustCompile(`^\| ([a-z_.]+) \| ([^|]+) \|`)
	docCodeRow    = regexp.MustCompile(`^\| (\d+) \| ([a-z_]+) \|`)
	docFDs        = map[fdRule]string{fdsNone: "0", fdsOne: "1", fdsWhenShm: `1 if memory = "shm", else 0`}
	docSenderName = map[senders]string{sentByClient: "client", sentByDaemon: "daemon", sentByEither: "either"}
)

// docFields flattens fs as docs/protocol.md lists them: name and type per
// row, inline structs as "dataset.name".
func docFields(fs []field, prefix string) []string {
	var rows []string
	for i := range fs {
		f := &fs[i]
		typ := wireNames[f.wire]
		switch f.wire {
		case wStruct:
			rows = append(rows, docFields(f.sub, prefix+f.name+".")...)
			continue
		case wStr:
			typ = "string"
		case wFixed:
			typ = fmt.Sprintf("%d bytes", f.n)
		case wList:
			typ = "list<"
		}
		rows = append(rows, prefix+f.name+" "+typ)
	}
	return rows
}

// TestDocsTable checks docs/protocol.md against the message table: the
// Messages table (id, name, sender, descriptors), each message's field
// table (names in wire order and their scalar types) and Error's codes.
func TestDocsTable(t *testing.T) {
	f, err := os.Open("../docs/protocol.md")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	rows := map[Type]string{}
	fields := map[Type][]string{}
	codes := map[Code]string{}
	var cur Type
	inTable := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := docMsgRow.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			rows[Type(n)] = m[2] + " " + m[3] + " " + m[4]
		}
		if m := docSection.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			cur, inTable = Type(n), false
			continue
		}
		if cur != 0 && strings.HasPrefix(line, "| field | type |") && fields[cur] == nil {
			inTable = true
			continue
		}
		if inTable {
			if m := docFieldRow.FindStringSubmatch(line); m != nil {
				typ := strings.TrimSpace(m[2])
				if strings.HasPrefix(typ, "list<") {
					typ = "list<"
				}
				fields[cur] = append(fields[cur], m[1]+" "+typ)
			} else if !strings.HasPrefix(line, "|---") {
				inTable = false
			}
		}
		if cur == TypeError {
			if m := docCodeRow.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				codes[Code(n)] = m[2]
			}
		}
	}
	for typ, e := range table {
		if e == nil {
			continue
		}
		want := e.name + " " + docSenderName[e.sender] + " " + docFDs[e.fds]
		if got := rows[Type(typ)]; got != want {
			t.Errorf("Messages table, type %d: %q, want %q", typ, got, want)
		}
		wantFields := docFields(e.fields, "")
		if e.prefix != "" {
			wantFields = append([]string{fmt.Sprintf("magic %d bytes", len(e.prefix))}, wantFields...)
		}
		if got := fields[Type(typ)]; strings.Join(got, ", ") != strings.Join(wantFields, ", ") {
			t.Errorf("### %d %s fields:\n got  %v\n want %v", typ, e.name, got, wantFields)
		}
	}
	if len(rows) != len(fields) {
		t.Errorf("%d messages in the table, %d field tables", len(rows), len(fields))
	}
	for c, name := range codeNames {
		if codes[c] != name {
			t.Errorf("code %d: docs say %q, ipc %q", c, codes[c], name)
		}
	}
	if len(codes) != len(codeNames) {
		t.Errorf("%d codes in the docs, %d in ipc", len(codes), len(codeNames))
	}
}
