package ipc

import (
	"fmt"
	"reflect"
)

//go:generate go test -run=^TestPythonSchema$ . -args -write-schema

// Type is the u16 message type in a frame header. Values are stable.
type Type uint16

// Message types (the gradient exchange's, 12 to 15, are in ring_msgs.go).
const (
	TypeHello      Type = 1
	TypeWelcome    Type = 2
	TypeOpen       Type = 3
	TypeOpened     Type = 4
	TypeStartEpoch Type = 5
	TypeBatchReady Type = 6
	TypeRelease    Type = 7
	TypeEpochEnd   Type = 8
	TypeError      Type = 9
	TypeGoodbye    Type = 10
	TypeSeeds      Type = 11
)

// senders says which sides of a connection may send a message.
type senders uint8

const (
	sentByClient senders = 1 << iota
	sentByDaemon
	sentByEither = sentByClient | sentByDaemon
)

// fdRule says how many file descriptors ride with a message (SCM_RIGHTS).
type fdRule uint8

const (
	fdsNone    fdRule = iota // never any
	fdsOne                   // always exactly one
	fdsWhenShm               // one when the message's Memory is MemoryShm, else none
)

// fdsMemoryFld is the field fdsWhenShm reads.
const fdsMemoryFld = "Memory"

// message is one entry of the protocol's message table.
type message struct {
	typ    Type
	name   string
	sender senders
	fds    fdRule
	prefix string // bytes every payload starts with (Hello's Magic)
	goType reflect.Type

	ptrType reflect.Type     // *goType
	fields  []field          // the struct's ipc tags, compiled (schema.go)
	check   bool             // the type has a check() *ProtocolError method
	fast    func() fastCodec // a new message with a hand-written codec (batchfast.go), or nil
}

// table is the protocol: every message, its type code, who sends it, the
// descriptors it carries and (through its struct's tags) its fields in
// wire order. docs/protocol.md describes the same table for people;
// python/gnnloader/_schema.py is generated from it (go generate ./ipc).
var table = compileTable([]message{
	{typ: TypeHello, name: "Hello", sender: sentByClient, prefix: Magic, goType: typeOf[Hello]()},
	{typ: TypeWelcome, name: "Welcome", sender: sentByDaemon, goType: typeOf[Welcome]()},
	{typ: TypeOpen, name: "Open", sender: sentByClient, goType: typeOf[Open]()},
	{typ: TypeOpened, name: "Opened", sender: sentByDaemon, fds: fdsWhenShm, goType: typeOf[Opened]()},
	{typ: TypeStartEpoch, name: "StartEpoch", sender: sentByClient, goType: typeOf[StartEpoch]()},
	{typ: TypeBatchReady, name: "BatchReady", sender: sentByDaemon, goType: typeOf[BatchReady]()},
	{typ: TypeRelease, name: "Release", sender: sentByClient, goType: typeOf[Release]()},
	{typ: TypeEpochEnd, name: "EpochEnd", sender: sentByDaemon, goType: typeOf[EpochEnd]()},
	{typ: TypeError, name: "Error", sender: sentByEither, goType: typeOf[Error]()},
	{typ: TypeGoodbye, name: "Goodbye", sender: sentByEither, goType: typeOf[Goodbye]()},
	{typ: TypeSeeds, name: "Seeds", sender: sentByClient, fds: fdsOne, goType: typeOf[Seeds]()},
	{typ: TypeRegisterGrad, name: "RegisterGrad", sender: sentByClient, goType: typeOf[RegisterGrad]()},
	{typ: TypeGradRegistered, name: "GradRegistered", sender: sentByDaemon, fds: fdsWhenShm, goType: typeOf[GradRegistered]()},
	{typ: TypeAllReduce, name: "AllReduce", sender: sentByClient, goType: typeOf[AllReduce]()},
	{typ: TypeAllReduceDone, name: "AllReduceDone", sender: sentByDaemon, goType: typeOf[AllReduceDone]()},
})

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// checker is a message with cross-field rules (Opened).
type checker interface{ check() *ProtocolError }

// compileTable compiles every entry's tags and indexes the table by type;
// a bad entry panics (the tests show which).
func compileTable(ms []message) []*message {
	var byType []*message
	for i := range ms {
		m := &ms[i]
		if err := compileMessage(m); err != nil {
			panic("ipc: message table: " + err.Error())
		}
		for int(m.typ) >= len(byType) {
			byType = append(byType, nil)
		}
		if byType[m.typ] != nil {
			panic(fmt.Sprintf("ipc: message table: type %d twice", m.typ))
		}
		byType[m.typ] = m
	}
	return byType
}

func compileMessage(m *message) error {
	fs, err := compileStruct(m.goType, "")
	if err != nil {
		return err
	}
	m.fields = fs
	p := reflect.New(m.goType).Interface()
	msg, ok := p.(Msg)
	if !ok || msg.Type() != m.typ {
		return fmt.Errorf("%s: (*%s).Type() is not %d", m.name, m.goType.Name(), m.typ)
	}
	_, m.check = p.(checker)
	m.ptrType = reflect.PointerTo(m.goType)
	if _, ok := p.(fastCodec); ok {
		m.fast = fastCodecs[m.typ]
		if m.fast == nil || m.prefix != "" || m.check {
			return fmt.Errorf("%s: a hand-written codec needs an entry in fastCodecs, and no prefix or check", m.name)
		}
	}
	if m.fds == fdsWhenShm {
		if f, ok := m.goType.FieldByName(fdsMemoryFld); !ok || f.Type.Kind() != reflect.String {
			return fmt.Errorf("%s: its descriptor rule needs a string field %s", m.name, fdsMemoryFld)
		}
	}
	return nil
}

// lookup returns the table entry of t, or nil.
func lookup(t Type) *message {
	if int(t) < len(table) {
		return table[t]
	}
	return nil
}

func (t Type) String() string {
	if e := lookup(t); e != nil {
		return e.name
	}
	return fmt.Sprintf("Type(%d)", uint16(t))
}

// newMsg returns a new zero message of type t, or nil for an unknown type.
func newMsg(t Type) Msg {
	if e := lookup(t); e != nil {
		return reflect.New(e.goType).Interface().(Msg)
	}
	return nil
}

// FDsFor returns how many file descriptors a frame carrying m must carry,
// by the table's rule for its type: 1 for an Opened or a GradRegistered
// with Memory "shm" (the slot ring's or the gradient buffer's memfd) and
// for Seeds (the seed-id memfd), 0 otherwise.
func FDsFor(m Msg) int {
	e := lookup(m.Type())
	if e == nil {
		return 0
	}
	switch e.fds {
	case fdsOne:
		return 1
	case fdsWhenShm:
		if reflect.ValueOf(m).Elem().FieldByName(fdsMemoryFld).String() == MemoryShm {
			return 1
		}
	}
	return 0
}
