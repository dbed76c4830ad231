package nft

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables"
)

// A batch goes to the kernel in one sendmsg, which it refuses (EMSGSIZE,
// "message too long") when longer than the socket's send buffer
// (net.core.wmem_default, 208 KiB by default): one batch held about 2,800
// mappings (issue 22; upstream adds 5,000). Raising the buffer past
// wmem_max takes CAP_NET_ADMIN in the initial user namespace
// (SO_SNDBUFFORCE), which a plugin in a rootless runtime lacks, so element
// changes are split instead: pmBatch sends them in batches of at most
// pmBatchBytes. An ADD of a few hundred mappings is still one batch, all
// or nothing in the kernel; past that, a batch that fails makes Setup
// undo the batches before it (pmBatch.undo), so ADD leaves all or nothing.

// pmBatchBytes bounds the element changes of one batch, with room below
// the default send buffer for the table, set and chain messages queued
// before them.
const pmBatchBytes = 128 << 10

// pmElemChunk bounds the elements of one netlink message: the element
// list is one nested attribute, whose length field has 16 bits, so 1000
// elements in one message would be cut short without an error.
const pmElemChunk = 200

// pmElemOp is element changes of one set in one message.
type pmElemOp struct {
	add bool
	set *nftables.Set
	els []nftables.SetElement
}

// pmBatch queues element changes on c and flushes them in batches of at
// most pmBatchBytes. It remembers what each sent batch did, for undo.
type pmBatch struct {
	c       *nftables.Conn
	bytes   int
	queued  []pmElemOp
	sent    []pmElemOp
	batches int
	// failBatch, when set, is asked with the number of each batch about
	// to be sent (1, 2, ...) whether the kernel shall refuse it (tests).
	failBatch func(n int) bool
}

// elemBytes is about what el takes in a message: key, end, data, comment
// and the attribute headers around them.
func elemBytes(el nftables.SetElement) int {
	return len(el.Key) + len(el.KeyEnd) + len(el.Val) + len(el.Comment) + 64
}

// add queues the addition of els to set.
func (b *pmBatch) add(set *nftables.Set, els []nftables.SetElement) error {
	return b.queue(pmElemOp{add: true, set: set, els: els})
}

// del queues the deletion of els from set.
func (b *pmBatch) del(set *nftables.Set, els []nftables.SetElement) error {
	return b.queue(pmElemOp{set: set, els: els})
}

func (b *pmBatch) queue(op pmElemOp) error {
	for chunk := range slices.Chunk(op.els, pmElemChunk) {
		n := 0
		for _, el := range chunk {
			n += elemBytes(el)
		}
		if b.bytes > 0 && b.bytes+n > pmBatchBytes {
			if err := b.flush(); err != nil {
				return err
			}
		}
		f := b.c.SetDeleteElements
		if op.add {
			f = b.c.SetAddElements
		}
		if err := f(op.set, chunk); err != nil {
			return fmt.Errorf("set %s: %w", op.set.Name, err)
		}
		b.queued = append(b.queued, pmElemOp{add: op.add, set: op.set, els: chunk})
		b.bytes += n
	}
	return nil
}

// flush sends what is queued (also the table, set and chain messages
// queued on c before) as one batch.
func (b *pmBatch) flush() error {
	b.batches++
	if b.failBatch != nil && b.failBatch(b.batches) {
		// A message the kernel refuses aborts the whole batch, as a real
		// failure would.
		b.c.DelTable(&nftables.Table{Name: "cniforge-injected-failure", Family: nftables.TableFamilyIPv4})
	}
	err := b.c.Flush() // clears c's queue, sent or not
	if err == nil {
		b.sent = append(b.sent, b.queued...)
	}
	b.queued, b.bytes = nil, 0
	return err
}

// undo reverts every sent batch, newest first: additions are deleted and
// deletions added back. Best effort: it goes on past a failure and
// returns them all.
func (b *pmBatch) undo() error {
	sent := b.sent
	b.sent = nil
	var errs []error
	for i := len(sent) - 1; i >= 0; i-- {
		op := sent[i]
		op.add = !op.add
		if err := b.queueUndo(op); err != nil {
			errs = append(errs, err)
		}
	}
	if err := b.c.Flush(); err != nil {
		errs = append(errs, err)
	}
	b.queued, b.bytes = nil, 0
	return errors.Join(errs...)
}

// queueUndo is queue for undo: full batches are flushed as they fill,
// with no test hook and no record.
func (b *pmBatch) queueUndo(op pmElemOp) error {
	n := 0
	for _, el := range op.els {
		n += elemBytes(el)
	}
	if b.bytes > 0 && b.bytes+n > pmBatchBytes {
		err := b.c.Flush()
		b.bytes = 0
		if err != nil {
			return err
		}
	}
	f := b.c.SetDeleteElements
	if op.add {
		f = b.c.SetAddElements
	}
	b.bytes += n
	return f(op.set, op.els)
}
