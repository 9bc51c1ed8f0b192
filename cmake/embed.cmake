# Writes the bytes of IN into OUT as `headsep::seed_csv` (a std::string_view).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," body "${hex}")
math(EXPR bytes "${n} / 2")
file(WRITE ${OUT} "#include <string_view>\nnamespace headsep {\nstatic const char kSeed[] = {${body} 0};\nextern const std::string_view seed_csv(kSeed, ${bytes});\n}\n")
