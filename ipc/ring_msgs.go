package ipc

// Gradient exchange (the ring all-reduce, package ring): a trainer opens a
// connection of its own for it and, after Hello/Welcome, sends RegisterGrad
// instead of Open. See docs/protocol.md, "Gradient exchange".
//
//	client                         daemon
//	Hello                    ->
//	                         <-    Welcome
//	RegisterGrad             ->    (waits until every rank of the job registered)
//	                         <-    GradRegistered (+ memfd for shm)
//	AllReduce{seq}           ->    (waits until every rank asked for seq)
//	                         <-    AllReduceDone{seq}
//	...                            (one AllReduce at a time per connection)
//	Goodbye                  ->
//
// These messages have their own order checker, GradState, since the
// connection never enters the batch phases.

// Message types of the gradient exchange.
const (
	TypeRegisterGrad   Type = 12
	TypeGradRegistered Type = 13
	TypeAllReduce      Type = 14
	TypeAllReduceDone  Type = 15
)

// GradDTypes are the element types an AllReduce may name.
var GradDTypes = []string{"float32", "bfloat16", "float16"}

// RegisterGrad (client to daemon) joins the job's gradient ring as Rank of
// WorldSize, with a gradient buffer of Bytes bytes (the largest bucket it
// will reduce) on Device ("cpu" or "cuda:N"). Every rank of a job names the
// same WorldSize and Bytes.
type RegisterGrad struct {
	Job       string `ipc:"job"`
	Rank      uint32 `ipc:"rank"`
	WorldSize uint32 `ipc:"world_size"`
	Device    string `ipc:"device"`
	Bytes     uint64 `ipc:"bytes"`
}

// GradRegistered (daemon to client) answers RegisterGrad once every rank of
// the job has registered. For MemoryShm the frame carries one memfd of Bytes
// bytes, the buffer; the handles are empty. For MemoryCUDA it carries no fd:
// MemHandle is the cudaIpcMemHandle_t of the buffer on CUDADevice
// (allocated by the daemon), Ready the cudaIpcEventHandle_t of the event the
// trainer records on its stream after writing a bucket, Done the one the
// daemon records when the result is in the buffer (the trainer's stream
// waits on it). Links says how each ring link runs, e.g.
// "rank 0 (GPU 0) -> rank 1 (GPU 1): peer" (or "host": pinned host memory).
type GradRegistered struct {
	Memory     string   `ipc:"memory"`
	Bytes      uint64   `ipc:"bytes"`
	CUDADevice uint32   `ipc:"cuda_device"`
	MemHandle  []byte   `ipc:"mem_handle,max=HandleSize,len=0|HandleSize"` // empty or HandleSize bytes
	Ready      []byte   `ipc:"ready,max=HandleSize,len=0|HandleSize"`      // empty or HandleSize bytes
	Done       []byte   `ipc:"done,max=HandleSize,len=0|HandleSize"`       // empty or HandleSize bytes
	Links      []string `ipc:"links"`
}

// AllReduce (client to daemon) asks for the all-reduce of the first Count
// elements of DType in the buffer, summed (Op "sum") or averaged ("avg")
// over the ranks. Seq numbers a connection's requests from 0; every rank
// sends the same Seq, Count, DType and Op. For MemoryCUDA the trainer has
// recorded Ready after its writes before sending it.
type AllReduce struct {
	Seq   uint64 `ipc:"seq"`
	Count uint64 `ipc:"count"`
	DType string `ipc:"dtype"`
	Op    string `ipc:"op"`
}

// AllReduceDone (daemon to client): the result of request Seq is in the
// buffer (MemoryShm), or will be once Done, recorded after it, completes
// (MemoryCUDA). Every rank's buffer holds the same bytes.
type AllReduceDone struct {
	Seq uint64 `ipc:"seq"`
}

func (*RegisterGrad) Type() Type   { return TypeRegisterGrad }
func (*GradRegistered) Type() Type { return TypeGradRegistered }
func (*AllReduce) Type() Type      { return TypeAllReduce }
func (*AllReduceDone) Type() Type  { return TypeAllReduceDone }

// Validate checks RegisterGrad's semantics (CodeBadRequest).
func (m *RegisterGrad) Validate() error {
	switch {
	case m.WorldSize == 0:
		return perr(CodeBadRequest, "RegisterGrad: world_size is 0")
	case m.Rank >= m.WorldSize:
		return perr(CodeBadRequest, "RegisterGrad: rank %d >= world_size %d", m.Rank, m.WorldSize)
	case m.Bytes == 0:
		return perr(CodeBadRequest, "RegisterGrad: bytes is 0")
	}
	_, err := ParseDevice(m.Device)
	return err
}

// Validate checks AllReduce's dtype and op (CodeBadRequest).
func (m *AllReduce) Validate() error {
	ok := false
	for _, t := range GradDTypes {
		ok = ok || m.DType == t
	}
	if !ok {
		return perr(CodeBadRequest, "AllReduce: dtype %q (want float32, bfloat16 or float16)", m.DType)
	}
	if m.Op != "sum" && m.Op != "avg" {
		return perr(CodeBadRequest, "AllReduce: op %q (want sum or avg)", m.Op)
	}
	return nil
}

// GradPhase is a gradient connection's state after the handshake.
type GradPhase uint8

const (
	GradRegister    GradPhase = iota // waiting for RegisterGrad
	GradRegistering                  // waiting for GradRegistered
	GradReady                        // AllReduce allowed
	GradReducing                     // waiting for AllReduceDone
	GradClosed                       // Error or Goodbye seen
)

// GradState checks the order of gradient-exchange messages on a connection
// whose handshake (Hello, Welcome) is done: RegisterGrad, GradRegistered,
// then AllReduce and AllReduceDone alternating, Seq counting from 0. Error
// and Goodbye are allowed in every phase but GradClosed.
type GradState struct {
	Phase GradPhase
	seq   uint64
}

// Next records message m sent in direction dir, or returns a *ProtocolError
// (CodeOutOfOrder) and leaves the state unchanged.
func (s *GradState) Next(dir Dir, m Msg) error {
	if s.Phase == GradClosed {
		return perr(CodeOutOfOrder, "%s after the connection closed", m.Type())
	}
	t := m.Type()
	if t == TypeError || t == TypeGoodbye {
		s.Phase = GradClosed
		return nil
	}
	bad := func() error { return perr(CodeOutOfOrder, "%s from the %s in gradient phase %d", t, dir, s.Phase) }
	switch {
	case s.Phase == GradRegister && dir == FromClient && t == TypeRegisterGrad:
		s.Phase = GradRegistering
	case s.Phase == GradRegistering && dir == FromDaemon && t == TypeGradRegistered:
		s.Phase = GradReady
	case s.Phase == GradReady && dir == FromClient && t == TypeAllReduce:
		if q := m.(*AllReduce).Seq; q != s.seq {
			return perr(CodeOutOfOrder, "AllReduce seq %d, want %d", q, s.seq)
		}
		s.Phase = GradReducing
	case s.Phase == GradReducing && dir == FromDaemon && t == TypeAllReduceDone:
		if q := m.(*AllReduceDone).Seq; q != s.seq {
			return perr(CodeOutOfOrder, "AllReduceDone seq %d, want %d", q, s.seq)
		}
		s.seq++
		s.Phase = GradReady
	default:
		return bad()
	}
	return nil
}
