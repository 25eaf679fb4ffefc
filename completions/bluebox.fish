# fish completion for bluebox
#
# Install as vendor_completions.d/bluebox.fish (or ~/.config/fish/completions/),
# or load it into the current shell with:   bluebox completion fish | source
#
# The script is deliberately thin: every candidate comes from the binary's hidden
#   bluebox __complete <word1> ... <wordN>
# command (words after "bluebox", up to and including the word being completed).
# It prints candidates one per line, already filtered and in the order to show them.
# A first line of exactly ":files" means "complete file names instead", ":dirs" directory
# names.

function __bluebox_complete
    # Words before the cursor (unescaped), then the word being completed.
    set -l tokens (commandline -opc)
    set -l current (commandline -ct)
    set -l bin (string replace -r -- '^~/' "$HOME/" $tokens[1])
    set -e tokens[1]
    set -l out (command $bin __complete $tokens $current 2>/dev/null)
    if test "$out[1]" = ":dirs"
        __fish_complete_directories $current
        return
    end
    if test "$out[1]" = ":files"
        __fish_complete_path $current
        return
    end
    if set -q out[1]
        printf '%s\n' $out
    end
end

complete -c bluebox -e
# -f: never fall back to file names; -k: keep the binary's order.
complete -c bluebox -f -k -a '(__bluebox_complete)'
