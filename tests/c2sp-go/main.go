// Command c2sp-check reads Countersign's audit log as a C2SP tlog-tiles log with Go's
// golang.org/x/mod/sumdb (note and tlog), an implementation Countersign shares no code with,
// and checks what the service claims:
//
//  1. <prefix>/checkpoint is a signed note that verifies under the log's vkey (sumdb/note);
//  2. the tiles it reads (tlog.TileHashReader, which authenticates every tile against the
//     checkpoint's root) give the checkpoint's root (tlog.TreeHash);
//  3. entry -index is in the entry bundle, hashes to the level-0 tile's leaf hash, and
//     tlog.ProveRecord / tlog.CheckRecord prove it in the checkpointed tree;
//  4. the service's own inclusion proof (GET /v1/audit/proof/inclusion) is the same path;
//  5. with -proof, a c2sp.org/tlog-proof@v1 file the service issued holds (its extra line is
//     the entry) under the same vkey.
//
// The only adaptation to sumdb's tiles is the path: C2SP drops sumdb's height component
// (tile/8/L/N becomes tile/L/N) and names data tiles "entries" (tile/8/data/N becomes
// tile/entries/N), whose bundles hold u16-length-prefixed entries.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const height = 8

var (
	prefix  = flag.String("prefix", "", "the log's tlog-tiles prefix URL")
	service = flag.String("service", "", "the service's base URL (for its JSON inclusion proof)")
	vkey    = flag.String("vkey", "", "the log's note verifier key")
	token   = flag.String("token", "", "an auditor token (entry bundles are auditors' only)")
	index   = flag.Int64("index", 0, "the 0-based entry to prove")
	proof   = flag.String("proof", "", "a tlog-proof file to check")
)

func get(url string, auth bool) ([]byte, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return nil, err
	}
	if auth && *token != "" {
		req.Header.Set("Authorization", "Bearer "+*token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, nil
}

// c2spPath is sumdb's tile path without its height component.
func c2spPath(t tlog.Tile) string {
	p := strings.TrimPrefix(t.Path(), fmt.Sprintf("tile/%d/", height))
	if strings.HasPrefix(p, "data/") {
		return "tile/entries/" + strings.TrimPrefix(p, "data/")
	}
	return "tile/" + p
}

type tiles struct{ fetched int }

func (r *tiles) Height() int { return height }

func (r *tiles) ReadTiles(ts []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(ts))
	for i, t := range ts {
		data, err := get(*prefix+"/"+c2spPath(t), false)
		if err != nil {
			return nil, err
		}
		if len(data) != t.W*tlog.HashSize {
			return nil, fmt.Errorf("tile %s is %d bytes, not %d", c2spPath(t), len(data), t.W*tlog.HashSize)
		}
		out[i] = data
		r.fetched++
	}
	return out, nil
}

func (r *tiles) SaveTiles([]tlog.Tile, [][]byte) {}

// checkpoint verifies a signed note and reads its first three lines.
func checkpoint(msg []byte, v note.Verifier) (origin string, tree tlog.Tree, err error) {
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		return "", tree, fmt.Errorf("checkpoint signature: %w", err)
	}
	lines := strings.SplitN(n.Text, "\n", 4)
	if len(lines) < 4 {
		return "", tree, errors.New("a checkpoint has origin, size and root lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		return "", tree, fmt.Errorf("size: %w", err)
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil {
		return "", tree, fmt.Errorf("root: %w", err)
	}
	if lines[0] != v.Name() {
		return "", tree, fmt.Errorf("origin %q is not the key's name %q", lines[0], v.Name())
	}
	return lines[0], tlog.Tree{N: size, Hash: root}, nil
}

func entries(bundle []byte) ([][]byte, error) {
	var out [][]byte
	for len(bundle) > 0 {
		if len(bundle) < 2 {
			return nil, errors.New("truncated length")
		}
		n := int(binary.BigEndian.Uint16(bundle))
		if len(bundle) < 2+n {
			return nil, errors.New("truncated entry")
		}
		out = append(out, bundle[2:2+n])
		bundle = bundle[2+n:]
	}
	return out, nil
}

func run() error {
	v, err := note.NewVerifier(*vkey)
	if err != nil {
		return fmt.Errorf("vkey: %w", err)
	}
	cp, err := get(*prefix+"/checkpoint", false)
	if err != nil {
		return err
	}
	origin, tree, err := checkpoint(cp, v)
	if err != nil {
		return err
	}
	fmt.Printf("checkpoint: %s, size %d, root %s (signature verified)\n", origin, tree.N, tree.Hash)
	tr := &tiles{}
	hr := tlog.TileHashReader(tree, tr)
	root, err := tlog.TreeHash(tree.N, hr)
	if err != nil {
		return fmt.Errorf("tree hash from tiles: %w", err)
	}
	if root != tree.Hash {
		return fmt.Errorf("tiles give root %s, the checkpoint %s", root, tree.Hash)
	}
	fmt.Printf("tiles: the root from %d tiles is the checkpoint's\n", tr.fetched)

	i := *index
	if i < 0 || i >= tree.N {
		return fmt.Errorf("entry %d is not in the tree of %d", i, tree.N)
	}
	// The bundle the checkpoint defines: full, or as wide as the tree's last level-0 tile.
	data := tlog.Tile{H: height, L: -1, N: i >> height, W: 1 << height}
	if rest := tree.N - data.N<<height; rest < int64(data.W) {
		data.W = int(rest)
	}
	bundle, err := get(*prefix+"/"+c2spPath(data), true)
	if err != nil {
		return err
	}
	es, err := entries(bundle)
	if err != nil {
		return fmt.Errorf("entry bundle %s: %w", c2spPath(data), err)
	}
	if len(es) != data.W {
		return fmt.Errorf("entry bundle %s holds %d entries, not %d", c2spPath(data), len(es), data.W)
	}
	// Every entry of the bundle hashes to its leaf hash in the authenticated level-0 tile.
	first := data.N << height
	for k, e := range es {
		leaves, err := hr.ReadHashes([]int64{tlog.StoredHashIndex(0, first+int64(k))})
		if err != nil {
			return err
		}
		if tlog.RecordHash(e) != leaves[0] {
			return fmt.Errorf("entry %d does not hash to its level-0 tile hash", first+int64(k))
		}
	}
	entry := es[i-first]
	leaf := tlog.RecordHash(entry)
	p, err := tlog.ProveRecord(tree.N, i, hr)
	if err != nil {
		return fmt.Errorf("prove record %d: %w", i, err)
	}
	if err := tlog.CheckRecord(p, tree.N, tree.Hash, i, leaf); err != nil {
		return fmt.Errorf("check record %d: %w", i, err)
	}
	fmt.Printf("entry %d: %d bytes, in the bundle of %d, proved by %d hashes\n", i, len(entry), len(es), len(p))

	if *service != "" {
		body, err := get(fmt.Sprintf("%s/v1/audit/proof/inclusion?seq=%d&size=%d", *service, i+1, tree.N), false)
		if err != nil {
			return err
		}
		var served struct {
			LeafHash string   `json:"leaf_hash"`
			Proof    []string `json:"proof"`
			Root     string   `json:"root"`
		}
		if err := json.Unmarshal(body, &served); err != nil {
			return err
		}
		if served.LeafHash != leaf.String() || served.Root != tree.Hash.String() || len(served.Proof) != len(p) {
			return errors.New("the service's inclusion proof differs from the tiles'")
		}
		for k, h := range p {
			if served.Proof[k] != h.String() {
				return fmt.Errorf("the service's inclusion proof differs at hash %d", k)
			}
		}
		fmt.Println("service: its inclusion proof is the one the tiles give")
	}

	if *proof != "" {
		text, err := os.ReadFile(*proof)
		if err != nil {
			return err
		}
		if err := checkTlogProof(text, v); err != nil {
			return fmt.Errorf("tlog-proof %s: %w", *proof, err)
		}
	}
	return nil
}

// checkTlogProof follows c2sp.org/tlog-proof: the leaf is the extra data (an audit line), the
// checkpoint must verify under v, and the path must lead to its root.
func checkTlogProof(text []byte, v note.Verifier) error {
	head, cp, ok := bytes.Cut(text, []byte("\n\n"))
	if !ok {
		return errors.New("no empty line before the checkpoint")
	}
	lines := strings.Split(string(head), "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" {
		return fmt.Errorf("first line %q", lines[0])
	}
	lines = lines[1:]
	var extra []byte
	if len(lines) > 0 && strings.HasPrefix(lines[0], "extra ") {
		var err error
		if extra, err = base64.StdEncoding.DecodeString(strings.TrimPrefix(lines[0], "extra ")); err != nil {
			return err
		}
		lines = lines[1:]
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "index ") {
		return errors.New("no index line")
	}
	i, err := strconv.ParseInt(strings.TrimPrefix(lines[0], "index "), 10, 64)
	if err != nil {
		return err
	}
	var path tlog.RecordProof
	for _, l := range lines[1:] {
		h, err := tlog.ParseHash(l)
		if err != nil {
			return err
		}
		path = append(path, h)
	}
	_, tree, err := checkpoint(cp, v)
	if err != nil {
		return err
	}
	if extra == nil {
		return errors.New("no extra line: the audit line is needed to compute the leaf")
	}
	if err := tlog.CheckRecord(path, tree.N, tree.Hash, i, tlog.RecordHash(extra)); err != nil {
		return err
	}
	fmt.Printf("tlog-proof: entry %d in the tree of %d holds (%d path hashes)\n", i, tree.N, len(path))
	return nil
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "c2sp-check:", err)
		os.Exit(1)
	}
	fmt.Println("c2sp-check: ok")
}
