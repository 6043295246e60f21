package gorgoniaop

// OpType names an op's type as the compiler's lowerings and the exporter's
// table tell ops apart: the name of Gorgonia's op type (its types are
// unexported, so a table cannot hold the types themselves) or of an op of
// package fused; Fused stands for any op that carries its own lowering. The
// tables are keyed by these constants, so a misspelt name does not compile.
type OpType string

// The op types the compiler and the exporter know.
const (
	AttentionOp         OpType = "AttentionOp"
	BatchNormOp         OpType = "BatchNormOp"
	BiasActOp           OpType = "BiasActOp"
	GELUOp              OpType = "GELUOp"
	GroupNormOp         OpType = "GroupNormOp"
	Iop                 OpType = "Iop"
	LayerNormOp         OpType = "LayerNormOp"
	AtOp                OpType = "atOp"
	AvgPoolDiffOp       OpType = "avgPoolDiffOp"
	AvgPoolOp           OpType = "avgPoolOp"
	BatchnormDiffOp     OpType = "batchnormDiffOp"
	ByIndicesOp         OpType = "byIndicesOp"
	ByIndicesOpDiffOp   OpType = "byIndicesOpDiffOp"
	Col2imOp            OpType = "col2imOp"
	ConcatOp            OpType = "concatOp"
	ConstantScalar      OpType = "constantScalar"
	ConstantTensor      OpType = "constantTensor"
	CtcLossDiffOp       OpType = "ctcLossDiffOp"
	CtcLossOp           OpType = "ctcLossOp"
	DiagFlatOp          OpType = "diagFlatOp"
	DropoutDiffOp       OpType = "dropoutDiffOp"
	DropoutOp           OpType = "dropoutOp"
	ElemBinOp           OpType = "elemBinOp"
	ElemUnaryOp         OpType = "elemUnaryOp"
	Fused               OpType = "fused"
	GlobalAveragePoolOp OpType = "globalAveragePoolOp"
	GroupNormDiffOp     OpType = "groupNormDiffOp"
	Im2colOp            OpType = "im2colOp"
	LinAlgBinOp         OpType = "linAlgBinOp"
	MaxBetween          OpType = "maxBetween"
	MaxOp               OpType = "maxOp"
	MaxPoolDiffOp       OpType = "maxPoolDiffOp"
	MaxPoolOp           OpType = "maxPoolOp"
	MinBetween          OpType = "minBetween"
	RandomOp            OpType = "randomOp"
	RepeatOp            OpType = "repeatOp"
	ReshapeOp           OpType = "reshapeOp"
	SizeOp              OpType = "sizeOp"
	SliceIncrOp         OpType = "sliceIncrOp"
	SliceOp             OpType = "sliceOp"
	SoftmaxDiffOp       OpType = "softmaxDiffOp"
	SoftmaxOp           OpType = "softmaxOp"
	SparsemaxDiffOp     OpType = "sparsemaxDiffOp"
	SparsemaxOp         OpType = "sparsemaxOp"
	SumOp               OpType = "sumOp"
	TensordotOp         OpType = "tensordotOp"
	TransposeOp         OpType = "transposeOp"
	UpsampleDiffOp      OpType = "upsampleDiffOp"
	UpsampleOp          OpType = "upsampleOp"
	YoloOp              OpType = "yoloOp"
)
