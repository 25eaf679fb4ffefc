# bash completion for bluebox                              -*- shell-script -*-
#
# Install as /usr/share/bash-completion/completions/bluebox, or load it into the
# current shell with:   source <(bluebox completion bash)
#
# The script is deliberately thin: every candidate comes from the binary's hidden
#   bluebox __complete <word1> ... <wordN>
# command (words after "bluebox", up to and including the word being completed).
# It prints candidates one per line, already filtered and in the order to show them.
# A first line of exactly ":files" means "complete file names instead", ":dirs" directory
# names.

_bluebox() {
    local bin=${COMP_WORDS[0]}
    [[ $bin == "~/"* ]] && bin=$HOME/${bin#"~/"}

    # Rebuild the words as typed, up to the cursor. Bash splits words at the
    # COMP_WORDBREAKS characters ":" and "=" (e.g. "--opt=val" becomes three
    # words), which the binary must not see; glue those pieces back together.
    local line=${COMP_LINE:0:COMP_POINT} brk="" pos=0 i n glue=0 w lead
    [[ $COMP_WORDBREAKS == *:* ]] && brk+=:
    [[ $COMP_WORDBREAKS == *=* ]] && brk+==
    local -a words=()
    for ((i = 0; i <= COMP_CWORD && i < ${#COMP_WORDS[@]}; i++)); do
        w=${COMP_WORDS[i]}
        lead=${line:pos}
        lead=${lead%%[![:space:]]*}
        pos=$((pos + ${#lead}))
        # Only the part of the current word that lies before the cursor.
        if ((i == COMP_CWORD)); then
            n=$((${#line} - pos))
            ((n < 0)) && n=0
            w=${w:0:n}
        fi
        if ((i > 0)) && [[ -n $brk && -z $lead ]] &&
            { ((glue)) || [[ -n $w && -z ${w//[$brk]/} ]]; }; then
            words[${#words[@]}-1]+=$w
        else
            words+=("$w")
        fi
        glue=0
        [[ -n $brk && -n $w && -z ${w//[$brk]/} ]] && glue=1
        pos=$((pos + ${#w}))
    done
    ((${#words[@]} > 1)) || return 0

    local cur=${words[${#words[@]}-1]}
    # Readline replaces only the text after the last word break; candidates
    # lose what precedes it (as bash-completion's __ltrim_colon_completions does).
    local rlcur=${w}
    ((glue)) && rlcur=""
    local strip=${cur%"$rlcur"}

    COMPREPLY=()
    local -a out=()
    local c
    while IFS= read -r c; do
        out+=("$c")
    done < <(command "$bin" __complete "${words[@]:1}" 2>/dev/null)

    if [[ ${out[0]-} == ":files" || ${out[0]-} == ":dirs" ]]; then
        local kind=-f
        [[ ${out[0]} == ":dirs" ]] && kind=-d
        if declare -F _filedir >/dev/null 2>&1; then
            # bash-completion's file completion (quoting, ~, directories).
            if [[ $kind == -d ]]; then _filedir -d; else _filedir; fi
        else
            compopt -o filenames 2>/dev/null
            while IFS= read -r c; do
                COMPREPLY+=("$c")
            done < <(compgen "$kind" -- "$cur")
        fi
        return 0
    fi

    compopt -o nosort 2>/dev/null
    for c in "${out[@]}"; do
        [[ -z $c ]] && continue
        # Drop the part of the word that precedes a word break (e.g. "name:").
        [[ -n $strip && $c == "$strip"* ]] && c=${c#"$strip"}
        COMPREPLY+=("$c")
    done
    return 0
}

complete -F _bluebox bluebox
