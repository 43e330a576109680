package api

// The caches of builder.add. The store hands over a cell's keys together,
// sorted by client, and the cells of one API mostly list the same clients
// in the same order: each cache bets on the next key being like the last.

// cellCursor saves the hour's map lookup for all but the first key of a cell.
type cellCursor struct {
	cell *cell // nil before the first key
	hour int
	node nodeID
}

// at is the cell of the previous key if it is that of hour and node, or nil.
func (c *cellCursor) at(hour int, node nodeID) *cell {
	if c.cell != nil && c.hour == hour && c.node == node {
		return c.cell
	}
	return nil
}

func (c *cellCursor) move(cl *cell, hour int, node nodeID) {
	c.cell, c.hour, c.node = cl, hour, node
}

// rowGuide saves the client map lookup for a cell's new rows, in step with the cell before.
type rowGuide struct {
	rows []userRow
	// pos is the row of rows that the cell's next new client most likely
	// matches.
	pos int
}

// next returns the client of the guide's next row if it is id.
func (g *rowGuide) next(clients []client, id *clientID) (int32, bool) {
	if g.pos < len(g.rows) {
		if ci := g.rows[g.pos].client; clients[ci].id == *id {
			g.pos++
			return ci, true
		}
	}
	return 0, false
}

// skip gets back in step with the guide when this cell lacks one of its
// clients, ci being the one after it.
func (g *rowGuide) skip(ci int32) {
	if g.pos+1 < len(g.rows) && g.rows[g.pos+1].client == ci {
		g.pos += 2
	}
}

// clientIndex saves the client map lookup for the previous key's client and the guide's next.
type clientIndex struct {
	ix   map[clientID]int32
	last int32 // the client of the previous key; -1 before the first
}

func newClientIndex() clientIndex {
	return clientIndex{ix: map[clientID]int32{}, last: -1}
}

// recent returns the index of id in clients if it is the previous key's
// client or the guide's next.
func (x *clientIndex) recent(clients []client, id *clientID, g *rowGuide) (int32, bool) {
	if x.last >= 0 && clients[x.last].id == *id {
		return x.last, true
	}
	ci, ok := g.next(clients, id)
	if ok {
		x.last = ci
	}
	return ci, ok
}

func (x *clientIndex) lookup(id clientID) (int32, bool) {
	ci, ok := x.ix[id]
	return ci, ok
}

func (x *clientIndex) add(id clientID, ci int32) {
	x.ix[id] = ci
}

// met makes ci, found or added through the map, the previous key's
// client, and keeps the guide in step.
func (x *clientIndex) met(ci int32, g *rowGuide) {
	g.skip(ci)
	x.last = ci
}

// rawVerbCache saves cardinality.Verb and the name map lookup for raw verbs met before.
type rawVerbCache struct {
	// last is the raw verb of the previous key, and lastIx its index.
	last   string
	lastIx uint16
	// The few verbs seen raw are compared before any map: the store's
	// strings are shared, so equal ones are found at once.
	raw   []string
	rawIx []uint16
}

// maxRawVerbs bounds the raw verbs compared before the map: data written
// before verbs were bounded may hold any number.
const maxRawVerbs = 16

// find returns the index of raw if it was met before.
func (c *rawVerbCache) find(raw string) (uint16, bool) {
	// Before the first verb, last is no verb's.
	if raw == c.last && len(c.raw) > 0 {
		return c.lastIx, true
	}
	for i, r := range c.raw {
		if r == raw {
			c.last, c.lastIx = raw, c.rawIx[i]
			return c.lastIx, true
		}
	}
	return 0, false
}

func (c *rawVerbCache) add(raw string, vi uint16) {
	if len(c.raw) < maxRawVerbs {
		c.raw = append(c.raw, raw)
		c.rawIx = append(c.rawIx, vi)
	}
	c.last, c.lastIx = raw, vi
}
