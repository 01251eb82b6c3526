"""What every HTTP provider shares: the one way it calls out (`client`: its pool, redirects never
followed, bounded answers), an upstream's error answers as gateway errors (`errors`), the
scrubber that clears every known credential from what an upstream said (`scrubbing`), and the
capped Server-Sent Events decoder (`sse`)."""
