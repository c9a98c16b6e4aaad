// Keyset paging of one listing (the rollout list, the prompts table): each page goes on from the
// cursor the page before it gave out (`next_cursor`, null after the last). A page asked for before
// `reset` (other filters, a reload, rows dropped) no longer follows the rows shown: it is dropped,
// and so is its error. The caller keeps its rows and draws them; this keeps where the next page starts.

export class KeysetPager {
  /** @param fetchPage  (cursor or null: from the start) => Promise of {results, next_cursor, ...} */
  constructor(fetchPage) {
    this.fetchPage = fetchPage;
    this.cursor = null; // where the next page starts; null: none (the end, or nothing read yet)
    this.version = 0; // bumped by reset and readFirst: an answer to an older ask is dropped
  }

  get hasMore() {
    return this.cursor !== null;
  }

  reset() {
    this.version += 1;
    this.cursor = null;
  }

  // The page after the last one read (`first`: from the start); null when a reset came while it
  // was read (a failure then is dropped too: the rows it was for are gone).
  async next(first = false) {
    const version = this.version;
    let page;
    try {
      page = await this.fetchPage(first ? null : this.cursor);
    } catch (err) {
      if (version !== this.version) return null;
      throw err;
    }
    if (version !== this.version) return null;
    this.cursor = page.next_cursor || null;
    return page;
  }

  // The listing read again from the start, page after page, until it holds `want` rows or ends:
  // {results, last} (`last`: the last page read, for what it says beside its rows), or null when a
  // reset came meanwhile. It supersedes a page asked for before it.
  async readFirst(want) {
    const version = ++this.version;
    const results = [];
    let cursor = null;
    let last = null;
    do {
      last = await this.fetchPage(cursor);
      if (version !== this.version) return null;
      results.push(...last.results);
      cursor = last.next_cursor || null;
    } while (cursor && results.length < want);
    this.cursor = cursor;
    return { results, last };
  }
}
