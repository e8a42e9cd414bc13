package sim

import "math/big"

// number writes a number (an integer when integer is set) within the schema's minimum,
// maximum, exclusiveMinimum and exclusiveMaximum (as numbers, or draft-04's booleans) and a
// multiple of its multipleOf. Arithmetic is exact, so 0.1-style steps give exact decimals.
func (g *generator) number(fs *jsonObject, integer bool) {
	lo, loEx := bound(fs, "minimum", "exclusiveMinimum", true)
	hi, hiEx := bound(fs, "maximum", "exclusiveMaximum", false)
	step := ratOf(fs.vals["multipleOf"])
	if step != nil && step.Sign() <= 0 {
		step = nil
	}
	if integer {
		if step == nil {
			step = big.NewRat(1, 1)
		} else {
			// k·p/q is an integer exactly when q divides k, so the integer multiples of p/q
			// are the multiples of p.
			step = new(big.Rat).SetInt(step.Num())
		}
	}
	var v *big.Rat
	if step != nil {
		var kmin, kmax *big.Int
		if lo != nil {
			q := new(big.Rat).Quo(lo, step)
			kmin = ceilRat(q)
			if loEx && q.IsInt() {
				kmin.Add(kmin, big.NewInt(1))
			}
		}
		if hi != nil {
			q := new(big.Rat).Quo(hi, step)
			kmax = floorRat(q)
			if hiEx && q.IsInt() {
				kmax.Sub(kmax, big.NewInt(1))
			}
		}
		v = new(big.Rat).Mul(new(big.Rat).SetInt(g.pickInt(kmin, kmax)), step)
	} else {
		v = g.pickReal(lo, hi)
	}
	g.f.literal(ratString(v))
}

// bound returns the stricter of a schema's inclusive and exclusive bound on one side, and
// whether it is exclusive; nil when there is none.
func bound(fs *jsonObject, inclusive, exclusive string, lower bool) (*big.Rat, bool) {
	in := ratOf(fs.vals[inclusive])
	exV := fs.vals[exclusive]
	if exV == true { // draft-04: the inclusive bound is exclusive
		return in, in != nil
	}
	ex := ratOf(exV)
	switch {
	case ex == nil:
		return in, false
	case in == nil:
		return ex, true
	}
	c := ex.Cmp(in)
	if c == 0 || (c > 0) == lower {
		return ex, true
	}
	return in, false
}

// pickInt returns an integer in [kmin, kmax] (either may be nil for no bound): near the lower
// bound, near the upper one when only that is set, and 1 to 100 when neither is.
func (g *generator) pickInt(kmin, kmax *big.Int) *big.Int {
	switch {
	case kmin != nil && kmax != nil:
		span := new(big.Int).Sub(kmax, kmin)
		span.Add(span, big.NewInt(1))
		if span.Sign() <= 0 {
			return kmin // an empty range: no value validates
		}
		if span.IsInt64() && span.Int64() < 100 {
			return new(big.Int).Add(kmin, big.NewInt(int64(g.below(int(span.Int64())))))
		}
		return new(big.Int).Add(kmin, big.NewInt(int64(g.below(100))))
	case kmin != nil:
		return new(big.Int).Add(kmin, big.NewInt(int64(g.below(10))))
	case kmax != nil:
		return new(big.Int).Sub(kmax, big.NewInt(int64(g.below(10))))
	}
	return big.NewInt(int64(1 + g.below(100)))
}

// pickReal returns a number strictly inside (lo, hi) (either may be nil): a quarter, half or
// three quarters of the way between two bounds, a little over a lower or under an upper one,
// and n + 0.5 for n in 0..99 without bounds. Equal bounds give that value.
func (g *generator) pickReal(lo, hi *big.Rat) *big.Rat {
	offset := new(big.Rat).SetFrac64(int64(2*g.below(10)+1), 2) // 0.5 … 9.5
	switch {
	case lo != nil && hi != nil:
		if lo.Cmp(hi) >= 0 {
			return lo
		}
		f := big.NewRat(int64(1+g.below(3)), 4)
		d := new(big.Rat).Sub(hi, lo)
		return d.Mul(d, f).Add(d, lo)
	case lo != nil:
		return offset.Add(offset, lo)
	case hi != nil:
		return offset.Sub(hi, offset)
	}
	return offset.Add(offset, new(big.Rat).SetInt64(int64(g.below(100))))
}

// floorRat returns the largest integer not above r.
func floorRat(r *big.Rat) *big.Int {
	return new(big.Int).Div(r.Num(), r.Denom()) // Euclidean division by a positive denominator floors
}

// ceilRat returns the smallest integer not below r.
func ceilRat(r *big.Rat) *big.Int {
	q := floorRat(r)
	if !r.IsInt() {
		q.Add(q, big.NewInt(1))
	}
	return q
}
