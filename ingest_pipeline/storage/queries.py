"""The SQL the commands and the evaluation run over the catalog's views, by name: the storage
package is the only code that names a view. Every value is a ``?`` parameter."""

PROFILE_CHUNKS_OF_DOCUMENTS = (
    "select * exclude (image) from chunks where profile = ? and document_id in (select "
    "unnest(?::VARCHAR[])) and text is not null"
)

SOURCE_PATHS = "select document_id, path from sources"

READ_PAGE_TEXTS_OF_DOCUMENTS = (
    "select document_id, page, text from pages where status = 'read' and document_id in (select "
    "unnest(?::VARCHAR[])) order by document_id, page"
)

PROFILE_CHUNK_COUNT_AND_MEAN_TOKENS = (
    "select count(*) as n, avg(tokens) as t from chunks where profile = ? and document_id in "
    "(select unnest(?::VARCHAR[])) and text is not null"
)

ERRORS_OF_DOCUMENTS = (
    "SELECT document_id, stage, reason FROM errors WHERE list_contains(?, document_id) ORDER BY "
    "document_id, stage"
)

PROFILE_CHUNK_COUNT = "SELECT count(*) AS n FROM chunks WHERE profile = ? AND list_contains(?, document_id)"

SOURCE_BY_ID_OR_PATH = "SELECT * FROM sources WHERE document_id = ? OR path = ? ORDER BY document_id"

PAGES_OF_DOCUMENT = "SELECT * FROM pages WHERE document_id = ? ORDER BY page"

CLAIMS_OF_DOCUMENT = (
    "SELECT * FROM claims WHERE document_id = ? AND (? IS NULL OR chunker = ?) ORDER BY chunker, page, piece"
)

CHUNKS_OF_DOCUMENT = (
    "SELECT * FROM chunks WHERE document_id = ? AND profile = ? AND (? IS NULL OR chunker = ?) "
    'ORDER BY page, "index"'
)

ERRORS_OF_DOCUMENT = "SELECT * FROM errors WHERE document_id = ? ORDER BY stage"

LINE_COUNTS_BY_PAGE = "SELECT page, count(*) AS n FROM page_lines WHERE document_id = ? GROUP BY page"

VECTORS_OF_DOCUMENT = "SELECT * FROM embeddings WHERE document_id = ? AND profile = ?"

CHUNK_BOXES_ON_PAGE = (
    'SELECT bbox, role, text FROM chunks WHERE document_id = ? AND profile = ? AND page = ? ORDER BY "index"'
)

CLAIM_BOXES_ON_PAGE = (
    "SELECT bbox, role, text FROM claims WHERE document_id = ? AND chunker = ? AND page = ? ORDER BY piece"
)

FIRST_CLAIMED_PAGE_WITH_BOX = (
    "SELECT min(page) AS page FROM claims WHERE document_id = ? AND list_contains(?, chunker) "
    "AND bbox IS NOT NULL"
)

FIRST_CHUNK_PAGE_WITH_BOX = (
    "SELECT min(page) AS page FROM chunks WHERE document_id = ? AND profile = ? AND bbox IS NOT NULL"
)

PAGE_SIZES = "SELECT page, width, height FROM pages WHERE document_id = ?"

HAS_CLAIMS_OF_CHUNKER = "SELECT 1 FROM claims WHERE document_id = ? AND chunker = ? LIMIT 1"
