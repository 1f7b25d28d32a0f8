package cudaext

// Dim3 is a grid or block shape; zero fields count as 1.
type Dim3 struct{ X, Y, Z uint32 }
