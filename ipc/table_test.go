package ipc

import (
	"reflect"
	"strings"
	"testing"
)

// TestSchemaTags shows that every kind of bad tag is refused when the table
// is compiled (the package's init panics on one, failing every test).
func TestSchemaTags(t *testing.T) {
	type noTag struct{ A uint32 }
	type unexported struct {
		A uint32 `ipc:"a"`
		b uint32
	}
	type badName struct {
		A uint32 `ipc:"A"`
	}
	type noWire struct {
		A float64 `ipc:"a"`
	}
	type mapField struct {
		A map[string]int `ipc:"a"`
	}
	type unknownOpt struct {
		A uint32 `ipc:"a,big"`
	}
	type maxOnInt struct {
		A uint32 `ipc:"a,max=MaxList"`
	}
	type unknownBound struct {
		A []uint32 `ipc:"a,max=MaxEverything"`
	}
	type strMax struct {
		A string `ipc:"a,max=MaxList"`
	}
	type atLeastUnsigned struct {
		A []uint32 `ipc:"a,atleast=0"`
	}
	type atLeastNaN struct {
		A int32 `ipc:"a,atleast=x"`
	}
	type limitConst struct {
		A uint32 `ipc:"a,limit=MaxDims"`
	}
	type limitSigned struct {
		A int32 `ipc:"a,limit=MaxBatchSize"`
	}
	type lenOnList struct {
		A []uint32 `ipc:"a,len=4"`
	}
	type lenBad struct {
		A []byte `ipc:"a,len=0|x"`
	}
	type nested struct {
		Inner struct{ B uint8 } `ipc:"inner"`
	}
	_ = unexported{}.b
	for _, v := range []any{noTag{}, unexported{}, badName{}, noWire{}, mapField{}, unknownOpt{}, maxOnInt{},
		unknownBound{}, strMax{}, atLeastUnsigned{}, atLeastNaN{}, limitConst{}, limitSigned{}, lenOnList{},
		lenBad{}, nested{}} {
		typ := reflect.TypeOf(v)
		if _, err := compileStruct(typ, ""); err == nil {
			t.Errorf("%s: compiled", typ.Name())
		} else if !strings.Contains(err.Error(), typ.Name()) && typ.Name() != "nested" {
			t.Errorf("%s: error %q does not name the struct", typ.Name(), err)
		}
	}
	type good struct {
		A uint32   `ipc:"a,limit=MaxBatchSize"`
		B []int32  `ipc:"b_2,max=MaxFanouts,atleast=-1"`
		C []byte   `ipc:"c,max=HandleSize,len=0|HandleSize"`
		D [4]byte  `ipc:"d"`
		E []Split  `ipc:"e"`
		F []string `ipc:"f"`
	}
	fs, err := compileStruct(reflect.TypeOf(good{}), "")
	if err != nil {
		t.Fatal(err)
	}
	if fs[4].elem.minWire != 10 || fs[3].minWire != 4 || fs[1].elem.min != -1 || len(fs[2].lens) != 2 {
		t.Errorf("compiled %+v", fs)
	}
	// A wrong entry in the table itself.
	for _, m := range []message{
		{typ: TypeHello, name: "Hello", goType: typeOf[Welcome]()},
		{typ: TypeSeeds, name: "Seeds", fds: fdsWhenShm, goType: typeOf[Seeds]()},
		{typ: TypeOpened, name: "Opened", goType: typeOf[Split]()},
	} {
		if err := compileMessage(&m); err == nil {
			t.Errorf("table entry %s accepted", m.name)
		}
	}
}

// TestFDsFor pins the descriptors each message carries.
func TestFDsFor(t *testing.T) {
	want := map[string]int{"opened_shm": 1, "seeds": 1, "seeds_times": 1, "grad_registered_shm": 1}
	all := goldens()
	for k, v := range ringGoldens() {
		all[k] = v
	}
	for name, m := range all {
		if got := FDsFor(m); got != want[name] {
			t.Errorf("FDsFor(%s) = %d, want %d", name, got, want[name])
		}
	}
	for m, n := range map[Msg]int{&Opened{}: 0, &Opened{Memory: MemoryShm}: 1, &GradRegistered{}: 0,
		&Seeds{}: 1, &BatchReady{}: 0, &GradRegistered{Memory: MemoryCUDA}: 0} {
		if got := FDsFor(m); got != n {
			t.Errorf("FDsFor(%#v) = %d, want %d", m, got, n)
		}
	}
}

// TestTableSenders checks the table's senders against the state machines:
// every message a State or GradState accepts comes from its sender.
func TestTableSenders(t *testing.T) {
	for typ, e := range table {
		if e == nil {
			continue
		}
		for _, dir := range []Dir{FromClient, FromDaemon} {
			from := sentByClient
			if dir == FromDaemon {
				from = sentByDaemon
			}
			for p := PhaseHello; p < PhaseClosed; p++ {
				s := State{phase: p}
				if s.Next(dir, Type(typ)) == nil && e.sender&from == 0 {
					t.Errorf("State accepts %s from the %s in phase %s; the table says otherwise", e.name, dir, p)
				}
			}
			for p := GradRegister; p < GradClosed; p++ {
				s := GradState{Phase: p}
				if s.Next(dir, newMsg(Type(typ))) == nil && e.sender&from == 0 {
					t.Errorf("GradState accepts %s from the %s in phase %d", e.name, dir, p)
				}
			}
		}
		if Type(typ).String() != e.name || newMsg(Type(typ)).Type() != Type(typ) {
			t.Errorf("type %d: name %s, message %T", typ, Type(typ), newMsg(Type(typ)))
		}
	}
	if s := Type(99).String(); s != "Type(99)" {
		t.Errorf("Type(99) = %s", s)
	}
}
