package kernels

import (
	"fmt"
	"sancus/kernels/matrix"
)

// Shape checks shared by every backend, so a wrong shape is the same clear
// error on the CPU and on a device.

// CheckMul checks C = A·B for an m×k A (rows, cols) and k×n B.
func CheckMul(what string, c *matrix.Dense, aRows, aCols int, b *matrix.Dense) error {
	if aCols != b.Rows || c.Rows != aRows || c.Cols != b.Cols {
		return fmt.Errorf("%s: shapes %dx%d · %dx%d -> %dx%d", what, aRows, aCols, b.Rows, b.Cols, c.Rows, c.Cols)
	}
	return nil
}

// CheckMulTN checks C = Aᵀ·B for an m×k A and m×n B.
func CheckMulTN(what string, c *matrix.Dense, aRows, aCols int, b *matrix.Dense) error {
	if aRows != b.Rows || c.Rows != aCols || c.Cols != b.Cols {
		return fmt.Errorf("%s: shapes (%dx%d)ᵀ · %dx%d -> %dx%d", what, aRows, aCols, b.Rows, b.Cols, c.Rows, c.Cols)
	}
	return nil
}

// CheckMulNT checks C = A·Bᵀ for an m×n A and k×n B.
func CheckMulNT(what string, c, a, b *matrix.Dense) error {
	if a.Cols != b.Cols || c.Rows != a.Rows || c.Cols != b.Rows {
		return fmt.Errorf("%s: shapes %dx%d · (%dx%d)ᵀ -> %dx%d", what, a.Rows, a.Cols, b.Rows, b.Cols, c.Rows, c.Cols)
	}
	return nil
}
