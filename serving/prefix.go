package serving

// Prefix caching (vLLM v1's KVCacheManager with enable_prefix_caching,
// vllm/v1/core/kv_cache_manager.py): a full block of a prompt is named by
// a hash of its tokens and of every block before it, and a new request
// whose first blocks hash the same as cached ones computes only the rest
// of its prompt; at least its last prompt token is always computed, to
// produce the first output token (get_computed_blocks keeps
// num_computed_tokens < num_tokens).
//
// The model: a request carries the hashes of its prompt's blocks of
// Traffic.HashBlockTokens tokens (Mooncake's hash_ids, 512 tokens each;
// synthesized for sessions, see sessionHashes); each scheduler keeps the
// hashes of the blocks it computed in a least-recently-used list as long
// as the KV pool could hold them (its blocks x block size / hash block
// tokens), the blocks of a request entering it when its prompt is
// computed (a session's turn also when it finishes, its output being part
// of the next turn's prompt). A request entering the running batch looks
// up the longest run of its leading hashes, and starts with that many
// tokens computed (at most prompt - 1, rounded down to the engine's block
// size). The hit blocks are still counted against the request's own KV
// blocks: vLLM shares them between requests, so a pool full of shared
// prefixes holds more than this model lets it (an upper bound on memory,
// a lower bound on concurrency). Eviction is whole-cache LRU: vLLM evicts
// only blocks no running request holds, which keeps hot prefixes longer.

// prefixCache is an LRU set of block hashes with a capacity in blocks.
type prefixCache struct {
	capBlocks int
	index     map[uint64]*lruNode
	head      lruNode // sentinel: head.next is the most recent
}

type lruNode struct {
	h          uint64
	prev, next *lruNode
}

func newPrefixCache(capBlocks int) *prefixCache {
	c := &prefixCache{capBlocks: max(1, capBlocks), index: make(map[uint64]*lruNode)}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

func (c *prefixCache) unlink(n *lruNode) {
	n.prev.next, n.next.prev = n.next, n.prev
}

func (c *prefixCache) pushFront(n *lruNode) {
	n.prev, n.next = &c.head, c.head.next
	c.head.next.prev = n
	c.head.next = n
}

// match returns how many leading hashes are cached, marking them used.
func (c *prefixCache) match(hs []uint64) int {
	k := 0
	for _, h := range hs {
		n, ok := c.index[h]
		if !ok {
			break
		}
		c.unlink(n)
		c.pushFront(n)
		k++
	}
	return k
}

// insert adds hashes (or marks them used), evicting the least recently
// used beyond the capacity.
func (c *prefixCache) insert(hs []uint64) {
	for _, h := range hs {
		if n, ok := c.index[h]; ok {
			c.unlink(n)
			c.pushFront(n)
			continue
		}
		n := &lruNode{h: h}
		c.index[h] = n
		c.pushFront(n)
		if len(c.index) > c.capBlocks {
			old := c.head.prev
			c.unlink(old)
			delete(c.index, old.h)
		}
	}
}

// sessionHashes are the block hashes of a session's turn that has tokens
// tokens of conversation: block i of every turn of a session holds the
// same tokens (each turn's prompt is the conversation so far), so its
// hash is the session's and the block's index.
func sessionHashes(session int64, tokens, blockTokens int) []uint64 {
	n := tokens / blockTokens
	out := make([]uint64, n)
	for i := range out {
		out[i] = splitmix(uint64(session)*0x9e3779b97f4a7c15 ^ uint64(i+1))
	}
	return out
}

// splitmix is SplitMix64's finalizer: a fixed bijection that spreads
// (session, block) pairs over the hash space, so they do not collide with
// a trace's small integer hash IDs.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
