# Script mode helper of ocsd_embed_file(): writes INPUT as a C char array.
file(READ ${INPUT} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE ${OUTPUT} "/* Generated from ${INPUT}; do not edit. */\n"
     "extern const char ${SYMBOL}[];\nconst char ${SYMBOL}[] = {${body} 0x00};\n")
