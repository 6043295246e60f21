package main

// families are the argument structs of kernels.cu's kernels, one table per
// family file of package backend: each struct's name in kernels.cu and its
// fields, in order, as C declarations separated by semicolons. A field's
// type is i64 (an int in Go), bool (an i64 of 0 or 1 in C), double
// (float64), u64 (uint64) or a pointer: T * or const T * to the element
// type, double *, int * or u64 * (an Operand in Go, or with its name
// marked @, a device address, uint64, from Planner.Scratch or Fault; marked
// ?, either, any).
//
// A kernel's Device method passes the Go struct's fields() to Launch, and
// kernels.cu's struct is the line written from the same entry: to add a
// field, add it here and run go generate ./backend. A struct whose name
// does not end in Args is a part of others (a geometry), a field's type
// in the entries after it; a field name may carry an array's length, a
// number (shape[8]) or one of lengths (code[CHAIN_STEPS]); an array's
// element is a scalar, a geometry or a pointer (const T *in[CHAIN_INPUTS]:
// in Go, an array of Operands).
var families = []family{
	{"backend/elementwise.go", []args{
		{"MapArgs", "i64 op, n; const T *src; T *dst"},
		{"ZipArgs", "i64 op, n; bool ascalar, bscalar; const T *a; const T *b; T *dst"},
		{"FillArgs", "i64 n; double v; T *dst"},
		{"CompareArgs", "i64 op, n; bool ascalar, bscalar; const T *a; const T *b; int *dst"},
	}},
	{"backend/chain.go", []args{
		{"ChainArgs", "i64 n, steps, scalars; i64 code[CHAIN_STEPS]; const T *in[CHAIN_INPUTS]; T *dst"},
	}},
	{"backend/copies.go", []args{
		{"CopyArgs", "i64 nd, n; bool add; i64 shape[8], ss[8], ds[8]; const T *src; T *dst"},
		{"RowsArgs", "i64 n, width, limit; bool gather; const int *rows; const T *src; T *dst; u64 *@fault"},
		{"TakeArgs", "i64 outer, axis, inner, n; const int *idx; const T *src; T *dst; u64 *@fault"},
		{"TakeIndexArgs", "i64 axis, n; const int *idx; int *@offsets; int *@cursor; int *@order; u64 *@fault"},
		{"TakeGradArgs", "i64 outer, axis, inner, n; const int *@offsets; const int *@order; const T *dy; T *dx"},
	}},
	{"backend/reductions.go", []args{
		{"ReduceArgs", "i64 op, outer, mid, inner; const T *src; T *dst"},
		{"PartialArgs", "i64 outer, mid, inner, chunks; const T *src; double *@part"},
		{"PartsArgs", "i64 cols, chunks; const double *@part; T *dst"},
		{"SoftmaxArgs", "bool log; i64 outer, axis, inner; const T *?src; T *?dst"},
		{"SoftmaxGradArgs", "bool log; i64 outer, axis, inner; const T *?y; const T *?dy; T *?dx"},
		{"FiniteArgs", "i64 n; const T *src; int *flag"},
		{"AbsMaxArgs", "i64 na, nb; const T *a; const T *b; u64 *@ws"},
		{"VerdictArgs", "i64 ra; double limit; u64 *@ws; int *flag"},
		{"CorrectArgs", "i64 rows, classes; const T *s; const T *t; int *count"},
		{"SparsemaxArgs", "i64 rows, cols; const T *src; T *dst"},
		{"SparsemaxGradArgs", "i64 rows, cols; const T *y; const T *dy; T *dx"},
	}},
	{"backend/fused.go", []args{
		{"CERowsArgs", "i64 rows, classes; const T *z; const T *t; double *@part"},
		{"CEArgs", "i64 rows; const double *@part; T *loss"},
		{"CEGradArgs", "i64 rows, classes; const T *z; const T *t; const T *g; T *dz"},
		{"LNArgs", "i64 rows, d; double eps; const T *x; const T *gamma; const T *beta; T *y"},
		{"LNGradArgs", "i64 rows, d; double eps; const T *x; const T *gamma; const T *dy; T *dx"},
		{"LNStatsArgs", "i64 rows, d; double eps; const T *x; double *@stats"},
		{"LNParamArgs", "i64 rows, d; const T *x; const T *dy; const double *@stats; T *dp"},
		{"LNPartArgs", "i64 rows, d, chunks; const T *x; const T *dy; const double *@stats; double *@part"},
		{"BiasActArgs", "i64 rows, n, act; bool grad; const T *x; const T *bias; const T *dy; T *out"},
		{"YoloArgs", "i64 batch, boxes, attrs, grid; double stride; const T *anchors; const T *src; T *dst"},
	}},
	{"backend/products.go", []args{
		{"ScaleArgs", "i64 batch, m, n, ldc, stride; double beta; T *c"},
	}},
	{"backend/linalg.go", []args{
		{"CholArgs", "i64 n; double tol; const T *@g; double *@r; u64 *@fault"},
		{"TrsmArgs", "i64 m, n; T *@a; const double *@r; u64 *@fault"},
		{"DiagArgs", "i64 n; const T *@g; double *@d"},
		{"PotrfCheckArgs", "i64 n; double tol; int *@info; const T *@r; const double *@d; u64 *@fault"},
	}},
	{"backend/conv.go", []args{
		{"ConvGeom", "i64 b, c, h, w, kh, kw, padh, padw, strideh, stridew, dilh, dilw, oh, ow"},
		{"UnfoldArgs", "ConvGeom g; i64 n, sj, sk, sp; const T *@x; T *@col"},
		{"FoldArgs", "ConvGeom g; i64 n, sj, sk, sp; const T *@col; T *@dx"},
		{"GatherPlanesArgs", "i64 n, f, p; const T *src; T *@dst"},
	}},
	{"backend/pooling.go", []args{
		{"PoolGeom", "i64 b, c, h, w, kh, kw, padh, padw, strideh, stridew, oh, ow"},
		{"MaxPoolArgs", "PoolGeom g; bool rect; const T *x; T *y"},
		{"MaxPoolGradArgs", "PoolGeom g; bool rect; const T *x; const T *y; const T *dy; T *dx"},
		{"PoolArgs", "PoolGeom g; const T *x; T *y"},
		{"AvgPoolGradArgs", "PoolGeom g; const T *dy; T *dx"},
	}},
	{"backend/convpool.go", []args{
		{"ConvPoolArgs", "PoolGeom g; i64 n, base; double p; u64 seed, stream; const double *step; const T *@c; const T *bias; T *@y; int *@arg"},
		{"PoolRouteArgs", "PoolGeom g; i64 n, sj, sf; double p; const T *@dy; const int *@arg; T *@dst"},
		{"PoolBiasGradArgs", "PoolGeom g; double p; const T *dy; const int *arg; T *db"},
	}},
	{"backend/step.go", []args{
		{"SGDArgs", "i64 n; double momentum, decay; T *w; const T *g; T *mom; const double *lr"},
		{"AdamArgs", "i64 n; double b1, b2, eps, decay; T *w; const T *g; T *m; T *v; const double *hyper"},
		{"AddScaledArgs", "i64 n; double alpha; const T *x; const T *y; T *dst; const double *scale"},
		{"SkewArgs", "i64 r; const T *b; double *y; const double *lr"},
		{"DeltaArgs", "i64 r; const double *y; T *dst"},
		{"SymArgs", "i64 n; T *a"},
	}},
	{"backend/random.go", []args{
		{"MaskArgs", "i64 n; double p; u64 seed, stream; const double *step; T *dst"},
		{"DropArgs", "i64 n; double p; u64 seed, stream; const double *step; const T *x; T *y"},
		{"RandomArgs", "i64 dist, n; double a, b; u64 seed, stream; const double *step; T *dst"},
	}},
	{"backend/norm.go", []args{
		{"BNStatsArgs", "i64 batch, c, spatial; bool update; double momentum, eps; const T *x; const T *dy; T *mean; T *var; double *@st"},
		{"BNRunArgs", "i64 c; double eps; const T *mean; const T *var; double *@st"},
		{"BNApplyArgs", "i64 n, c, spatial; const T *x; const double *@st; T *y"},
		{"BNGradArgs", "i64 n, c, spatial; bool training; const T *x; const T *dy; const double *@st; T *dx"},
	}},
}

// lengths are the arrays' lengths that a table names: each a macro of
// kernels.cu, whose #define line go generate ./backend writes, and a Go
// constant of package backend of the same value, which it writes in
// backend/kernel_args.go.
var lengths = []length{
	{"CHAIN_INPUTS", "MaxChainInputs", 8, "the operands a Chain reads"},
	{"CHAIN_STEPS", "MaxChainSteps", 16, "the functions a Chain applies"},
}
